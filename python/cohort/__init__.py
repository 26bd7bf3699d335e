"""Cohort's Python package.

The protocols and the runtime are Rust (the ``cohort`` command). This package holds the tools
written in Python: :mod:`cohort.plot` renders benchmark reports as PNG charts.
"""

__version__ = "0.1.0"

"""The type stubs of the native module match it (mypy's stubtest), and the package's public
API type-checks against them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]


def test_stubs_match_the_native_module() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "cohort._native"], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_public_modules_type_check_against_the_stubs() -> None:
    modules = ["__init__", "errors", "_aio", "_stop", "_progress", "lrt", "group", "sim", "medium", "beams"]
    modules += [f"bridge/{m}" for m in ("__init__", "__main__", "bench", "config", "core", "links", "qos", "wire")]
    files = [str(PYTHON_DIR / "cohort" / f"{m}.py") for m in modules]
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=PYTHON_DIR,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_tools_work_without_loading_the_native_module() -> None:
    """`cohort tune` and the plots import the package without the Rust extension."""
    code = "import sys, cohort, cohort.plot, cohort.tune; assert 'cohort._native' not in sys.modules"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr

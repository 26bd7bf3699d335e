"""Every Python code block of docs/python.md and of the README runs, from the repository root."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "python.md", ROOT / "README.md"]


def blocks() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for i, m in enumerate(re.finditer(r"^```python\n(.*?)^```", doc.read_text(), re.S | re.M)):
            out.append((f"{doc.name}#{i}", m.group(1)))
    return out


@pytest.mark.parametrize(("name", "code"), blocks(), ids=[b[0] for b in blocks()])
def test_code_block_runs(name: str, code: str) -> None:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{name}:\n{r.stdout}\n{r.stderr}"


def test_the_docs_have_python_blocks() -> None:
    assert len(blocks()) >= 5

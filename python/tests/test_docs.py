"""Every code block of the README and of the guide (docs/*.md) runs, from the repository root.

Blocks by language: ``python`` runs as a script; ``sh`` runs in bash with this checkout's
``cohort`` binary on PATH and the team secret in the environment (``sh root`` only as root, as
CI runs; ``sh no_run`` is not run: it needs a robot's radio, hours, or is the test command
itself); ``toml`` parses; ``rust`` blocks are doctests of ``cohort-bench`` (checked here to be
included there); ``text`` is prose. Every ``cohort`` command line of every ``sh`` block, run or
not, is parsed by the real CLI in ``crates/cohort-cli/src/doc_commands.rs``. docs/bridge.md's
blocks run in test_bridge.py, which also loads its ``toml`` blocks as bridge configurations.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OWN_TEST = {"bridge.md"}  # test_bridge.py::test_the_docs_code_blocks_run
SECRET = "docs test team secret, 32 bytes!"
BLOCK = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```$", re.S | re.M)


def blocks() -> list[tuple[str, str, set[str], str]]:
    """(id, language, attributes, code) of every fenced block of the pages tested here."""
    out = []
    for page in PAGES:
        if page.name in OWN_TEST:
            continue
        text = page.read_text()
        for m in BLOCK.finditer(text):
            lang, attrs = m.group(1), set(m.group(2).replace(",", " ").split())
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{page.name}:{line}", lang, attrs, m.group(3)))
    return out


def cohort_bin_dir() -> str:
    """Where this checkout's newest `cohort` build is (`COHORT_BIN` overrides)."""
    if os.environ.get("COHORT_BIN"):
        return str(Path(os.environ["COHORT_BIN"]).parent)
    builds = [ROOT / "target" / p / "cohort" for p in ("debug", "release")]
    builds = [b for b in builds if os.access(b, os.X_OK)]
    if not builds:
        pytest.skip("no cohort binary built (cargo build -p cohort-cli; scripts/test builds it)")
    return str(max(builds, key=lambda b: b.stat().st_mtime).parent)


ALL = blocks()


@pytest.mark.parametrize(("name", "lang", "attrs", "code"), ALL, ids=[b[0] for b in ALL])
def test_code_block(name: str, lang: str, attrs: set[str], code: str, tmp_path: Path) -> None:
    if lang == "python":
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{name}:\n{r.stdout}\n{r.stderr}"
    elif lang == "sh":
        assert attrs <= {"no_run", "root"}, f"{name}: unknown attributes {attrs}"
        if "no_run" in attrs:
            return
        if "root" in attrs and os.geteuid() != 0:
            pytest.skip(f"{name} needs root (CI runs it)")
        env = dict(os.environ, COHORT_TEAM_SECRET=SECRET, HOME=str(tmp_path))
        env["PATH"] = f"{cohort_bin_dir()}:{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
        # As root `sudo` is the identity (CI's container may not have the program).
        prelude = 'if [ "$(id -u)" = 0 ]; then sudo() { "$@"; }; fi\n'
        if "root" in attrs:
            # A block that fails half-way still takes its testbed runs down.
            runs = ["", *(f" --run {n}" for n in re.findall(r"--run (\w+)", code))]
            downs = "; ".join(f"cohort testbed down{r} >/dev/null 2>&1" for r in runs)
            prelude += f"trap 'status=$?; set +e; {downs}; exit $status' EXIT\n"
        r = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", prelude + code],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        assert r.returncode == 0, f"{name}:\n{code}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    elif lang == "toml":
        tomllib.loads(code)
    elif lang == "rust":
        lib = (ROOT / "crates" / "cohort-bench" / "src" / "lib.rs").read_text()
        page = name.split(":")[0]
        path = "README.md" if page == "README.md" else f"docs/{page}"
        assert f'include_str!("../../../{path}")' in lib, f"{path} has Rust blocks: include it in cohort-bench's docs"
    else:
        assert lang == "text", f"{name}: a code block needs a language the tests know (python, sh, toml, rust, text)"


def test_the_pages_have_blocks_of_each_kind() -> None:
    langs = [b[1] for b in ALL]
    assert langs.count("python") >= 5 and langs.count("rust") >= 5 and langs.count("sh") >= 5, langs
    assert sum(1 for b in ALL if b[1] == "sh" and "no_run" not in b[2]) >= 3


def test_every_relative_link_resolves() -> None:
    """Links between the pages, to charts and to files of the repository point at something
    (links that leave the repository, such as ../shared/DESIGN.md, are not checked)."""
    broken = []
    for page in PAGES:
        prose = BLOCK.sub("", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            if path.is_relative_to(ROOT) and not path.exists():
                broken.append(f"{page.name}: {target}")
    assert not broken, broken

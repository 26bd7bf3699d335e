"""TEST FIXTURE: a fake cgroup v2 tree in a temporary directory.

This machine mounts cpu, memory and cpuset as cgroup v1 controllers, so the tuner's v2 code
cannot be exercised on the real v2 hierarchy (which only offers ``hugetlb`` here). The fake is a
directory of plain files whose writes, mkdirs and rmdirs go through :class:`FakeCgroup2`, which
enforces the rules of Documentation/admin-guide/cgroup-v2.rst that the tuner depends on:

* ``cgroup.subtree_control`` reads as the enabled names (``cpu memory pids``) and takes only
  ``+name``/``-name`` tokens: a plain ``cpu memory`` is EINVAL; enabling a controller missing
  from ``cgroup.controllers`` is ENOENT; disabling one that a child still enables is EBUSY;
  enabling in a non-root cgroup that holds processes is EBUSY ("no internal processes");
* enabling a controller creates its interface files in every child and lists it in their
  ``cgroup.controllers``; disabling removes them;
* ``cpu.weight`` takes an integer in [1, 10000] (ERANGE otherwise), ``memory.high``/``low``/
  ``max`` ``max`` or a byte count, ``cpuset.cpus`` a CPU list of online CPUs (or empty);
* ``cgroup.procs`` takes a pid, which leaves whatever cgroup of the tree held it;
* ``rmdir`` removes a cgroup's interface files with it, and is EBUSY while a live process or a
  child cgroup is inside; a file that does not exist cannot be created (EACCES).

It is installed by replacing ``cohort.tune.system.KERNEL`` (the object through which the
tuner changes kernel files); paths outside the fake root go to the real kernel.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from cohort.tune import system

CONTROLLERS = ("cpuset", "cpu", "io", "memory", "pids")
INTERFACE: dict[str, dict[str, str]] = {
    "cpu": {"cpu.weight": "100", "cpu.max": "max 100000", "cpu.weight.nice": "0"},
    "cpuset": {"cpuset.cpus": "", "cpuset.mems": "", "cpuset.cpus.effective": ""},
    "memory": {"memory.high": "max", "memory.low": "0", "memory.max": "max", "memory.min": "0"},
    "pids": {"pids.max": "max"},
    "io": {"io.weight": "default 100"},
}
CORE = ("cgroup.procs", "cgroup.controllers", "cgroup.subtree_control")


def _err(code: int, path: str | Path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


class FakeCgroup2(system.KernelFiles):
    """A fake cgroup2 mount at ``root`` (see the module doc)."""

    def __init__(self, root: Path, subtree_control: str = "", controllers: tuple[str, ...] = CONTROLLERS) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._write_file(self.root / "cgroup.controllers", " ".join(controllers))
        self._write_file(self.root / "cgroup.procs", "")
        self._write_file(self.root / "cgroup.subtree_control", "")
        for tok in subtree_control.split():
            self.write(str(self.root / "cgroup.subtree_control"), f"+{tok}")
        self._real = system.KERNEL

    @classmethod
    def attach(cls, root: Path) -> FakeCgroup2:
        """The fake tree already at ``root`` (made by another process), unchanged."""
        fake = cls.__new__(cls)
        fake.root = Path(root)
        fake._real = system.KERNEL
        return fake

    # ---- installation ------------------------------------------------------------------
    def install(self) -> FakeCgroup2:
        self._real = system.KERNEL
        system.KERNEL = self
        return self

    def uninstall(self) -> None:
        system.KERNEL = self._real

    def detect(self, want: str | int = "auto") -> object:
        """:func:`cohort.tune.cgroups.detect` as it sees this tree (for patching the runner's)."""
        from cohort.tune.cgroups import detect

        return detect(want, self.mounts_text(), "0::/\n")

    def mounts_text(self) -> str:
        """A /proc/self/mounts with only this tree, for :func:`cohort.tune.cgroups.detect`."""
        return f"cgroup2 {self.root} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"

    def snapshot(self) -> dict[str, str]:
        """Every directory and file of the tree with its content (dead pids left out)."""
        out: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            d = Path(dirpath)
            out[str(d.relative_to(self.root)) + "/"] = ""
            for f in filenames:
                text = (d / f).read_text()
                if f == "cgroup.procs":
                    text = " ".join(p for p in text.split() if Path(f"/proc/{p}").exists())
                out[str((d / f).relative_to(self.root))] = text
            dirnames.sort()
        return out

    # ---- helpers -----------------------------------------------------------------------
    def _inside(self, path: Path) -> bool:
        try:
            path.resolve().relative_to(self.root.resolve())
            return True
        except ValueError:
            return False

    @staticmethod
    def _write_file(path: Path, text: str) -> None:
        path.write_text(text)

    @staticmethod
    def _words(path: Path) -> list[str]:
        return path.read_text().split() if path.exists() else []

    def _is_cgroup(self, d: Path) -> bool:
        return (d / "cgroup.procs").exists()

    def _children(self, d: Path) -> list[Path]:
        return [c for c in d.iterdir() if c.is_dir() and self._is_cgroup(c)]

    def _live_pids(self, d: Path) -> list[str]:
        return [p for p in self._words(d / "cgroup.procs") if Path(f"/proc/{p}").exists()]

    # ---- the kernel's operations -------------------------------------------------------
    def mkdir(self, path: Path) -> None:
        path = Path(path)
        if not self._inside(path):
            self._real.mkdir(path)
            return
        parent = path.parent
        if not self._is_cgroup(parent):
            raise _err(errno.ENOENT, path)
        if path.exists():
            raise _err(errno.EEXIST, path)
        path.mkdir()
        enabled = self._words(parent / "cgroup.subtree_control")
        self._write_file(path / "cgroup.controllers", " ".join(enabled))
        self._write_file(path / "cgroup.procs", "")
        self._write_file(path / "cgroup.subtree_control", "")
        for c in enabled:
            for f, v in INTERFACE.get(c, {}).items():
                self._write_file(path / f, v)

    def rmdir(self, path: Path) -> None:
        path = Path(path)
        if not self._inside(path):
            self._real.rmdir(path)
            return
        if not path.exists():
            raise _err(errno.ENOENT, path)
        if self._children(path) or self._live_pids(path):
            raise _err(errno.EBUSY, path)
        for f in path.iterdir():
            f.unlink()
        path.rmdir()

    def write(self, path: str, value: str) -> None:
        p = Path(path)
        if not self._inside(p):
            self._real.write(path, value)
            return
        if not p.exists():
            raise _err(errno.EACCES, p)  # cgroupfs files cannot be created
        name = p.name
        if name == "cgroup.subtree_control":
            self._subtree_control(p.parent, value)
        elif name == "cgroup.procs":
            self._procs(p.parent, value)
        elif name == "cpu.weight":
            v = value.strip()
            if not v.isdigit():
                raise _err(errno.EINVAL, p)
            if not 1 <= int(v) <= 10000:
                raise _err(errno.ERANGE, p)
            self._write_file(p, v)
        elif name in ("memory.high", "memory.low", "memory.max", "memory.min"):
            v = value.strip()
            if v != "max" and not v.isdigit():
                raise _err(errno.EINVAL, p)
            self._write_file(p, v)
        elif name == "cpuset.cpus":
            v = value.strip()
            if v and not self._cpu_list_ok(v):
                raise _err(errno.EINVAL, p)
            self._write_file(p, v)
        elif name in ("cgroup.controllers", "cpuset.cpus.effective"):
            raise _err(errno.EACCES, p)  # read-only
        else:
            self._write_file(p, value.strip())

    @staticmethod
    def _cpu_list_ok(v: str) -> bool:
        n = os.cpu_count() or 1
        for part in v.split(","):
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
            if not m:
                return False
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if lo > hi or hi >= n:
                return False
        return True

    def _subtree_control(self, d: Path, value: str) -> None:
        f = d / "cgroup.subtree_control"
        tokens = value.split()
        if not tokens:
            return  # an empty write changes nothing, as in the kernel
        available = self._words(d / "cgroup.controllers")
        enable: list[str] = []
        disable: list[str] = []
        for tok in tokens:
            if len(tok) < 2 or tok[0] not in "+-":
                raise _err(errno.EINVAL, f)
            name = tok[1:]
            if name not in CONTROLLERS:
                raise _err(errno.EINVAL, f)
            (enable if tok[0] == "+" else disable).append(name)
        if any(c not in available for c in enable):
            raise _err(errno.ENOENT, f)
        kids = self._children(d)
        for c in disable:
            if any(c in self._words(k / "cgroup.subtree_control") for k in kids):
                raise _err(errno.EBUSY, f)
        if enable and d != self.root and self._live_pids(d):
            raise _err(errno.EBUSY, f)  # no internal processes
        now = self._words(f)
        new = [c for c in CONTROLLERS if (c in now or c in enable) and c not in disable]
        self._write_file(f, " ".join(new))
        for k in kids:
            self._write_file(k / "cgroup.controllers", " ".join(new))
            for c in CONTROLLERS:
                files = INTERFACE.get(c, {})
                if c in new and c not in now:
                    for fn, v in files.items():
                        self._write_file(k / fn, v)
                elif c not in new and c in now:
                    for fn in files:
                        (k / fn).unlink(missing_ok=True)

    def _procs(self, d: Path, value: str) -> None:
        v = value.strip()
        if not v.isdigit():
            raise _err(errno.EINVAL, d / "cgroup.procs")
        if not Path(f"/proc/{v}").exists():
            raise _err(errno.ESRCH, d / "cgroup.procs")
        if d != self.root and self._words(d / "cgroup.subtree_control"):
            raise _err(errno.EBUSY, d / "cgroup.procs")  # no internal processes
        for dirpath, _dirs, files in os.walk(self.root):
            if "cgroup.procs" in files:
                pf = Path(dirpath) / "cgroup.procs"
                kept = [p for p in self._words(pf) if p != v]
                self._write_file(pf, "\n".join(kept))
        pf = d / "cgroup.procs"
        self._write_file(pf, "\n".join([*self._words(pf), v]))

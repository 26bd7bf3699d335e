"""Every change the tuner makes to the system goes through :class:`System`.

Before a change, the prior state is appended to a journal on disk (``state.jsonl`` in the state
directory, one JSON object a line, fsynced), so ``restore`` can undo a session that crashed or
was killed. In dry-run mode nothing is written anywhere: each change is printed instead, as
``write PATH <- VALUE``, ``mkdir PATH``, ``rmdir PATH``, ``sched TID POLICY ...``.

Journal entries (``op``):

* ``write`` — ``path``, ``prior`` (the value to write back; only the first write of a path in a
  session is journaled, which is the value before the session);
* ``mkdir`` — ``path`` (restore removes it);
* ``move`` — ``pid``, ``start``, ``prior`` (the cgroup.procs file of the cgroup it left):
  restore moves a process that still runs back;
* ``spawn`` — ``pid``, ``start`` (its start time in clock ticks, so a reused pid is never
  killed): restore kills the process group;
* ``sched`` — ``tid``, ``start``, ``prior`` (the thread's previous scheduling attributes);
* ``session`` — ``pid`` and the ``locks`` the session holds: ``restore`` takes the same locks,
  so it refuses to undo a session that is still running.

Restore kills spawned processes first, then undoes the rest newest-first, so rt_runtime of child
cgroups is lowered before their parents' and directories are empty before they are removed.
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cohort.tune.errors import KnobError, StateError
from cohort.tune.sched import set_attr

DEFAULT_STATE_DIR = "/var/lib/cohort-tune"


LOCK_DIR = "/run/cohort-tune"


class Lock:
    """An exclusive ``flock`` on ``LOCK_DIR/<name>.lock`` naming its holder.

    Sessions lock every resource they change: ``system`` when they touch system-wide knobs
    (THP), ``cgroup-<root>`` for their cgroup tree. A second session on the same resources
    gets a StateError instead of journaling the first one's temporary values as "prior"."""

    def __init__(self, name: str, lock_dir: str = LOCK_DIR) -> None:
        self.path = Path(lock_dir) / f"{name}.lock"
        self.fd: int | None = None

    def acquire(self, who: str) -> None:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StateError(f"{self.path}: another cohort tune session holds it ({holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {who}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock; a killed holder's lock goes with it
            self.fd = None


def proc_start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a process or thread; None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def normalize_read(path: str, raw: str) -> str:
    """The value of a sysfs/cgroup file as it must be written back.

    Selector files such as THP's ``always [madvise] never`` read back as the chosen word."""
    text = raw.strip()
    if "[" in text and "]" in text:
        return text[text.index("[") + 1 : text.index("]")]
    return text


class Journal:
    """Append-only record of prior state in ``<state_dir>/state.jsonl``."""

    def __init__(self, state_dir: str | Path) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / "state.jsonl"

    def exists(self) -> bool:
        return self.path.exists() and self.path.stat().st_size > 0

    def begin(self) -> None:
        """Start a session; refuses while an earlier session is unrestored."""
        if self.exists():
            raise StateError(
                f"{self.path} holds an unrestored session (a tuner crashed or ran with --keep); "
                f"run `cohort tune restore --state-dir {self.dir}` first"
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path.touch()

    def append(self, entry: dict[str, Any]) -> None:
        entry = {**entry, "t": time.time()}
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn last line from a crash mid-append: its change never happened
        return out

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class System:
    """Performs (or, dry-run, prints) every change, journaling the prior state first."""

    def __init__(
        self, journal: Journal | None, dry_run: bool = False, echo: Callable[[str], None] | None = None
    ) -> None:
        self.journal = journal
        self.dry_run = dry_run
        self.echo = echo or (lambda s: print(s, flush=True))
        self._written: set[str] = set()
        self.log: list[str] = []  # every change made or (dry-run) that would be made

    def _note(self, line: str) -> None:
        self.log.append(line)
        if self.dry_run:
            self.echo(line)

    def _journal(self, entry: dict[str, Any]) -> None:
        if self.journal is not None and not self.dry_run:
            self.journal.append(entry)

    @staticmethod
    def read(path: str | Path) -> str:
        try:
            return normalize_read(str(path), Path(path).read_text())
        except OSError as e:
            raise KnobError(str(path), f"cannot read: {e.strerror}", e.errno) from e

    def write(self, path: str | Path, value: str | int, hint: str = "") -> None:
        path = str(path)
        value = str(value)
        if path not in self._written:
            prior = self.read(path) if Path(path).exists() else None
            if prior is None and not self.dry_run:
                raise KnobError(path, "does not exist (is the controller mounted / the kernel option set?)")
            self._journal({"op": "write", "path": path, "prior": prior})
            self._written.add(path)
        self._note(f"write {path} <- {value}")
        if self.dry_run:
            return
        raw_write(path, value, hint)

    def mkdir(self, path: str | Path) -> bool:
        """Create a cgroup directory (and journal it); False when it already existed."""
        p = Path(path)
        if p.is_dir():
            return False
        self._note(f"mkdir {p}")
        if self.dry_run:
            return True
        self._journal({"op": "mkdir", "path": str(p)})
        try:
            p.mkdir()
        except OSError as e:
            raise KnobError(str(p), f"cannot create cgroup: {e.strerror}", e.errno) from e
        return True

    def rmdir(self, path: str | Path) -> None:
        self._note(f"rmdir {path}")
        if not self.dry_run:
            rmdir_retry(Path(path))

    def move(self, pid: int, procs_file: str | Path, hint: str = "") -> None:
        """Move a process into a cgroup. Journals the cgroup it leaves (same hierarchy) so
        restore can move it back if it still runs; a process we spawned dies instead."""
        procs_file = Path(procs_file)
        self._note(f"write {procs_file} <- {pid}")
        if self.dry_run:
            return
        prior = _prior_cgroup_procs(pid, procs_file)
        self._journal({"op": "move", "pid": pid, "start": proc_start_time(pid), "prior": prior})
        raw_write(str(procs_file), str(pid), hint)

    def spawned(self, pid: int) -> None:
        self._journal({"op": "spawn", "pid": pid, "start": proc_start_time(pid)})

    def sched_prior(self, tid: int, prior: dict[str, int]) -> None:
        self._journal({"op": "sched", "tid": tid, "start": proc_start_time(tid), "prior": prior})


def _prior_cgroup_procs(pid: int, procs_file: Path) -> str | None:
    """The cgroup.procs file of the cgroup ``pid`` is in now, in the hierarchy of ``procs_file``."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for mount in procs_file.parents:
        if (mount / "cgroup.procs").exists() and not (mount.parent / "cgroup.procs").exists():
            break
    else:
        return None
    v2 = (mount / "cgroup.controllers").exists()
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        mine = not ctrls if v2 else bool(set(ctrls.split(",")) & set(mount.name.split(",")))
        candidate = mount / path.lstrip("/") / "cgroup.procs"
        if mine and candidate.exists():
            return str(candidate)
    return None


def raw_write(path: str, value: str, hint: str = "") -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as e:
        msg = f"writing {value!r} failed: {e.strerror}"
        if hint:
            msg += f" ({hint})"
        raise KnobError(path, msg, e.errno) from e


def rmdir_retry(p: Path, timeout_s: float = 3.0) -> None:
    """rmdir a cgroup; killed tasks take a moment to leave it, so retry EBUSY for a while."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            p.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno_mod.EBUSY or time.monotonic() > deadline:
                raise KnobError(str(p), f"cannot remove cgroup: {e.strerror}", e.errno) from e
            time.sleep(0.05)


def kill_group(pid: int, start: int | None, timeout_s: float = 3.0) -> bool:
    """SIGKILL a spawned process group if the pid still names the process we started."""
    if start is None or proc_start_time(pid) != start:
        return False
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            target()
    deadline = time.monotonic() + timeout_s
    while proc_start_time(pid) == start and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.02)
    return True


def restore(journal: Journal, echo: Callable[[str], None] = print) -> list[str]:
    """Undo a journaled session. Returns the problems met; the journal is removed only when
    there were none (so a partly failed restore can be retried)."""
    entries = journal.entries()
    problems: list[str] = []
    held: list[Lock] = []
    try:
        for e in entries:
            if e.get("op") == "session" and int(e.get("pid", -1)) != os.getpid():
                for name in e.get("locks", []):
                    lock = Lock(name)
                    lock.acquire(f"restoring {journal.dir}")  # refuses while the session still runs
                    held.append(lock)
        _undo(entries, problems, echo)
    finally:
        for lock in held:
            lock.release()
    if not problems:
        journal.clear()
    return problems


def _undo(entries: list[dict[str, Any]], problems: list[str], echo: Callable[[str], None]) -> None:

    for e in entries:
        if e.get("op") == "spawn" and kill_group(int(e["pid"]), e.get("start")):
            echo(f"killed process group {e['pid']}")
    for e in reversed(entries):
        op = e.get("op")
        try:
            if op == "write" and e.get("prior") is not None:
                if Path(e["path"]).exists():
                    raw_write(e["path"], str(e["prior"]))
                    echo(f"restored {e['path']} = {e['prior']}")
            elif op == "mkdir":
                rmdir_retry(Path(e["path"]))
                echo(f"removed {e['path']}")
            elif op == "move":
                pid = int(e["pid"])
                if e.get("prior") and e.get("start") is not None and proc_start_time(pid) == e["start"]:
                    raw_write(e["prior"], str(pid))
                    echo(f"moved {pid} back to {Path(e['prior']).parent}")
            elif op == "sched":
                tid = int(e["tid"])
                if e.get("start") is not None and proc_start_time(tid) == e["start"]:
                    set_attr(tid, e["prior"])
                    echo(f"restored scheduling of thread {tid}")
        except (KnobError, OSError) as err:
            problems.append(str(err))

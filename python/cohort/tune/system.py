"""Every change the tuner makes to the system goes through :class:`System`.

Before a change, the prior state is appended to a journal on disk (``state.jsonl`` in the state
directory, one JSON object a line), so ``restore`` can undo a session that crashed or was
killed. Each append is fsynced, and so is the state directory whenever the journal is created,
appended to, rewritten or removed: a power cut never leaves a change on the system whose
journal line (or the journal file's directory entry) is not on disk. In dry-run mode nothing
is written anywhere: each change is printed instead, as ``write PATH <- VALUE``,
``mkdir PATH``, ``rmdir PATH``, ``sched TID POLICY ...``.

Journal entries (``op``):

* ``session`` — ``pid``, ``id`` (random, names the session), ``boot_id`` (the kernel's
  ``/proc/sys/kernel/random/boot_id``) and the ``locks`` the session holds: ``restore`` takes
  the same locks, so it refuses to undo a session that is still running;
* ``write`` — ``path``, ``prior`` (the value to write back; only the first write of a path in a
  session is journaled, which is the value before the session). A cgroup v2
  ``cgroup.subtree_control`` reads back as a list of names (``cpu memory pids``) but takes only
  ``+name``/``-name`` changes (Documentation/admin-guide/cgroup-v2.rst, "Enabling and
  Disabling"; a plain list gives EINVAL), so restore writes the difference between what it
  reads now and the prior: ``-cpuset`` for what the session enabled, ``+x`` for what it
  disabled — an empty prior removes everything the session added;
* ``mkdir`` — ``path`` (restore removes it);
* ``move`` — ``pid``, ``start``, ``prior`` (the cgroup.procs file of the cgroup it left):
  restore moves a process that still runs back;
* ``spawn`` — ``pid``, ``start`` (its start time in clock ticks, so a reused pid is never
  killed): restore kills the process group;
* ``sched`` — ``tid``, ``start``, ``prior`` (the thread's previous scheduling attributes);
* ``restore-failed`` — written by a restore that could not undo everything: ``problems``. The
  journal then holds only the entries still to undo.

Restore kills spawned processes first, then undoes the rest newest-first, so rt_runtime of child
cgroups is lowered before their parents' and directories are empty before they are removed.

**After a reboot** (the journal's boot id is not the running kernel's) a (pid, start tick) pair
names nothing the session started: start ticks count from boot, so a deterministic boot can
give an unrelated process the same pair. Restore then never kills, moves or re-schedules
anything, and writes back only knobs on file systems that survive a reboot; cgroupfs, sysfs,
procfs and tmpfs are rebuilt at boot, so for the tuner's own knobs (all on those) there is
nothing to undo and the journal is removed. A journal without a boot id (written by a tuner
from before it recorded one) gets its knobs written back, but no process is touched.

**A restore that fails** keeps, in the journal, what it could not undo (and why), so ``restore``
can be retried once the cause is fixed. ``restore --force`` undoes what it can and then sets
the journal aside as ``state.failed-<time>.jsonl`` (listing each knob it could not put back,
with its prior value, so it can be done by hand), which lets new sessions start.
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import json
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cohort.tune.errors import KnobError, StateError
from cohort.tune.sched import set_attr

DEFAULT_STATE_DIR = "/var/lib/cohort-tune"
LOCK_DIR = "/run/cohort-tune"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
# file systems the kernel rebuilds at every boot: what the tuner wrote there is gone after one
VOLATILE_FS = frozenset({"cgroup", "cgroup2", "sysfs", "proc", "tmpfs", "devtmpfs", "debugfs", "tracefs"})


class KernelFiles:
    """How the tuner changes kernel files: cgroupfs and sysfs writes, cgroup mkdir and rmdir.

    The real kernel's is the only implementation in the package. The test suite swaps in a
    fake cgroup v2 tree (``python/tests/fake_cgroup2.py``, a test fixture) through
    :data:`KERNEL` to check v2 restore on a machine that mounts its controllers as v1."""

    def write(self, path: str, value: str) -> None:
        with open(path, "w") as f:
            f.write(value)

    def mkdir(self, path: Path) -> None:
        path.mkdir()

    def rmdir(self, path: Path) -> None:
        path.rmdir()


KERNEL = KernelFiles()


def boot_id() -> str:
    """The running kernel's boot id (a fresh random UUID at every boot)."""
    try:
        return Path(BOOT_ID_PATH).read_text().strip()
    except OSError:
        return "unknown"


def new_session_id() -> str:
    return uuid.uuid4().hex


class Lock:
    """An exclusive ``flock`` on ``LOCK_DIR/<name>.lock`` naming its holder.

    Sessions lock every resource they change: ``system`` when they touch system-wide knobs
    (THP), ``cgroup-<root>`` for their cgroup tree. A second session on the same resources
    gets a StateError instead of journaling the first one's temporary values as "prior"."""

    def __init__(self, name: str, lock_dir: str | None = None) -> None:
        self.path = Path(lock_dir or LOCK_DIR) / f"{name}.lock"
        self.fd: int | None = None

    def acquire(self, who: str) -> None:
        import fcntl

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StateError(f"{self.path}: cannot create the session lock: {e.strerror}") from e
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


def fsync_dir(d: Path) -> None:
    """fsync a directory, so the entries created, renamed or removed in it are on disk."""
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fs_type(path: str | Path, mounts_text: str | None = None) -> str:
    """The file system type of the mount holding ``path`` (longest matching mount point)."""
    if mounts_text is None:
        try:
            mounts_text = Path("/proc/self/mounts").read_text()
        except OSError:
            return "unknown"
    p = os.path.abspath(str(path))
    best, kind = "", "unknown"
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        inside = p == mnt or p.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) >= len(best):
            best, kind = mnt, parts[2]
    return kind


def survives_reboot(path: str | Path, mounts_text: str | None = None) -> bool:
    return fs_type(path, mounts_text) not in VOLATILE_FS


class Journal:
    """Append-only record of prior state in ``<state_dir>/state.jsonl``."""

    def __init__(self, state_dir: str | Path) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / "state.jsonl"

    def exists(self) -> bool:
        return self.path.exists() and self.path.stat().st_size > 0

    def begin(self) -> None:
        """Start a session; refuses while an earlier session is unrestored (the runner restores
        it first, see :meth:`cohort.tune.runner.Session.__enter__`)."""
        if self.exists():
            failed = self.failures()
            if failed:
                raise StateError(
                    f"{self.path}: an earlier restore could not undo everything ({'; '.join(failed)}); fix that and "
                    f"run `cohort tune restore --state-dir {self.dir}`, or `cohort tune restore --force --state-dir "
                    f"{self.dir}` to set the journal aside (it lists what to put back by hand)"
                )
            raise StateError(
                f"{self.path} holds an unrestored session (a tuner crashed or ran with --keep); "
                f"run `cohort tune restore --state-dir {self.dir}` first"
            )
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StateError(f"{self.dir}: cannot create the state directory: {e.strerror}") from e
        self._create_empty()

    def _create_empty(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.dir)

    def append(self, entry: dict[str, Any]) -> None:
        entry = {**entry, "t": time.time()}
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.dir)

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(errors="replace").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line from a crash mid-append: its change never happened
            if isinstance(e, dict):
                out.append(e)
        return out

    def session(self) -> dict[str, Any] | None:
        return next((e for e in self.entries() if e.get("op") == "session"), None)

    def failures(self) -> list[str]:
        """The problems of the last restore that failed part-way (empty if none did)."""
        failed = [e for e in self.entries() if e.get("op") == "restore-failed"]
        return [str(p) for p in failed[-1].get("problems", [])] if failed else []

    def rewrite(self, entries: list[dict[str, Any]]) -> None:
        """Replace the journal by ``entries`` atomically (write, fsync, rename, fsync dir)."""
        tmp = self.dir / "state.jsonl.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, "".join(json.dumps(e) + "\n" for e in entries).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.dir)

    def set_aside(self) -> Path:
        """Move the journal out of the way (kept for the record); returns where it went."""
        dest = self.dir / f"state.failed-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.jsonl"
        os.replace(self.path, dest)
        fsync_dir(self.dir)
        return dest

    def clear(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return
        fsync_dir(self.dir)


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
            KERNEL.mkdir(p)
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
        KERNEL.write(path, value)
    except OSError as e:
        msg = f"writing {value!r} failed: {e.strerror}"
        if hint:
            msg += f" ({hint})"
        raise KnobError(path, msg, e.errno) from e


def subtree_control_changes(current: str, prior: str) -> list[str]:
    """The ``+name``/``-name`` writes that turn a cgroup v2 ``cgroup.subtree_control`` reading
    ``current`` into one reading ``prior``: disables first (a controller is disabled in a
    child before its parent, which restore's newest-first order gives), then enables."""
    have, want = current.split(), prior.split()
    return [f"-{c}" for c in have if c not in want] + [f"+{c}" for c in want if c not in have]


def restore_write(path: str, prior: str) -> str:
    """Write a journaled prior value back; returns what was written (for the log)."""
    if Path(path).name == "cgroup.subtree_control":
        changes = subtree_control_changes(normalize_read(path, Path(path).read_text()), prior)
        for change in changes:
            raw_write(path, change, "cgroup v2 takes +name/-name; a controller still enabled below cannot be disabled")
        return " ".join(changes) or "(unchanged)"
    raw_write(path, prior)
    return prior


def rmdir_retry(p: Path, timeout_s: float = 3.0) -> None:
    """rmdir a cgroup; killed tasks take a moment to leave it, so retry EBUSY for a while."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            KERNEL.rmdir(p)
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


def restore(
    journal: Journal, echo: Callable[[str], None] = print, force: bool = False, only_session: str | None = None
) -> list[str]:
    """Undo a journaled session. Returns the problems met.

    Without problems the journal is removed. With problems it is rewritten to hold only what is
    still to undo plus a ``restore-failed`` entry (so a retry redoes nothing twice and
    :meth:`Journal.begin` can say why it refuses); with ``force`` it is then set aside instead,
    so new sessions can start, and each problem is reported with the prior value to put back.
    ``only_session``: do nothing unless the journal (read once the locks are held) is that
    session's (the watchdog of a kept profile must never undo a later session)."""
    entries = journal.entries()
    problems: list[str] = []
    held: list[Lock] = []
    left: list[dict[str, Any]] = []
    try:
        for e in entries:
            if e.get("op") == "session" and int(e.get("pid", -1)) != os.getpid():
                for name in e.get("locks", []):
                    lock = Lock(name)
                    lock.acquire(f"restoring {journal.dir}")  # refuses while the session still runs
                    held.append(lock)
        if only_session is not None:
            entries = journal.entries()
            session = next((e for e in entries if e.get("op") == "session"), {})
            if session.get("id") != only_session:
                return []
        left = _undo(entries, problems, echo)
        if not problems:
            journal.clear()
        else:
            session = [e for e in entries if e.get("op") == "session"]
            journal.rewrite([*session, *left, {"op": "restore-failed", "problems": problems, "t": time.time()}])
            if force:
                dest = journal.set_aside()
                echo(f"journal set aside as {dest}; new sessions can start")
    finally:
        for lock in held:
            lock.release()
    return problems


def _boot_of(entries: list[dict[str, Any]]) -> str | None:
    session = next((e for e in entries if e.get("op") == "session"), None)
    recorded = session.get("boot_id") if session else None
    return str(recorded) if recorded is not None else None


def _undo(entries: list[dict[str, Any]], problems: list[str], echo: Callable[[str], None]) -> list[dict[str, Any]]:
    """Undo every entry; returns the entries whose undo failed (each failure is in ``problems``).

    Processes are touched only when the journal names this boot. A journal without a boot id
    (written before the tuner recorded one) gets its knobs written back, as before, but no
    process is touched: nothing tells whether a pid still names the same process."""
    recorded, now = _boot_of(entries), boot_id()
    same_boot = recorded is not None and recorded == now
    volatile_ok = same_boot or recorded is None
    if recorded is not None and not same_boot:
        echo(
            f"the journal is from boot {recorded}, this is boot {now}: no process it names is killed, moved or "
            "re-scheduled, and only knobs on file systems that survive a reboot are written back"
        )
    failed: list[dict[str, Any]] = []
    for e in entries:
        if e.get("op") == "spawn" and same_boot and kill_group(int(e["pid"]), e.get("start")):
            echo(f"killed process group {e['pid']}")
    for e in reversed(entries):
        try:
            undo_entry(e, same_boot, volatile_ok, echo)
        except (KnobError, OSError) as err:
            problems.append(_describe_failure(e, err))
            failed.append(e)
    failed.reverse()
    return failed


def _describe_failure(e: dict[str, Any], err: BaseException) -> str:
    if e.get("op") == "write":
        return f"{err} (prior value {e.get('prior')!r})"
    return str(err)


def undo_entry(e: dict[str, Any], same_boot: bool, volatile_ok: bool, echo: Callable[[str], None]) -> None:
    """Undo one journal entry (spawned processes are killed before, by :func:`_undo`).
    ``volatile_ok``: knobs on file systems rebuilt at boot (cgroupfs, sysfs) may be written."""
    op = e.get("op")
    if op == "write" and e.get("prior") is not None:
        path = str(e["path"])
        if (volatile_ok or survives_reboot(path)) and Path(path).exists():
            echo(f"restored {path} = {restore_write(path, str(e['prior']))}")
    elif op == "mkdir":
        path = str(e["path"])
        if volatile_ok or survives_reboot(path):
            rmdir_retry(Path(path))
            echo(f"removed {path}")
    elif op == "move" and same_boot:
        pid = int(e["pid"])
        if e.get("prior") and e.get("start") is not None and proc_start_time(pid) == e["start"]:
            raw_write(e["prior"], str(pid))
            echo(f"moved {pid} back to {Path(e['prior']).parent}")
    elif op == "sched" and same_boot:
        tid = int(e["tid"])
        if e.get("start") is not None and proc_start_time(tid) == e["start"]:
            set_attr(tid, e["prior"])
            echo(f"restored scheduling of thread {tid}")

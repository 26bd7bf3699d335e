"""Real-time scheduling of an app's threads: SCHED_DEADLINE and SCHED_FIFO.

Python has no ``os.sched_setattr``; SCHED_DEADLINE needs the raw ``sched_setattr`` system call
(number 314 on x86_64, 274 on aarch64), called here through ctypes with ``struct sched_attr``.

Pitfalls handled here, each turned into a clear :class:`~cohort.tune.errors.KnobError`:

* A deadline task cannot fork or create threads (``EAGAIN`` in the child's creator). Apps get
  their policy after they said ``ready`` (all threads started), and by default with
  ``SCHED_FLAG_RESET_ON_FORK``, so a later fork/thread start works (the new task is ordinary).
* Admission control: the sum of runtime/period over all deadline tasks must fit in
  ``sched_rt_runtime_us / sched_rt_period_us`` of each CPU of the root domain, else ``EBUSY``
  (:class:`~cohort.tune.errors.AdmissionError`).
* A deadline task must be allowed on every CPU of its root domain: a narrower cpuset gives
  ``EPERM``.
* With ``CONFIG_RT_GROUP_SCHED`` a SCHED_FIFO task in a cgroup whose ``cpu.rt_runtime_us`` is 0
  gives ``EPERM``; the runner sets ``cpu.rt_runtime_us`` (app cgroup and parents) first.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from pathlib import Path

from cohort.tune.errors import AdmissionError, KnobError

SCHED_OTHER, SCHED_FIFO, SCHED_RR, SCHED_BATCH, SCHED_IDLE, SCHED_DEADLINE = 0, 1, 2, 3, 5, 6
SCHED_FLAG_RESET_ON_FORK = 0x01
POLICY_NAMES = {0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}

_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275), "arm64": (274, 275)}


class SchedAttr(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)


def _nr() -> tuple[int, int]:
    arch = platform.machine()
    if arch not in _SYSCALLS:
        raise KnobError("sched_setattr", f"no syscall number known for architecture {arch}")
    return _SYSCALLS[arch]


def get_attr(tid: int) -> dict[str, int]:
    """The thread's scheduling attributes as a dict (the journal's format)."""
    a = SchedAttr()
    if _libc.syscall(_nr()[1], tid, ctypes.byref(a), ctypes.sizeof(a), 0) != 0:
        e = ctypes.get_errno()
        raise KnobError(f"thread {tid}", f"sched_getattr failed: {os.strerror(e)}", e)
    return {
        "policy": a.sched_policy,
        "flags": a.sched_flags & SCHED_FLAG_RESET_ON_FORK,
        "nice": a.sched_nice,
        "priority": a.sched_priority,
        "runtime_ns": a.sched_runtime,
        "deadline_ns": a.sched_deadline,
        "period_ns": a.sched_period,
    }


def set_attr(tid: int, attr: dict[str, int]) -> None:
    """sched_setattr(tid, attr); errors become KnobError/AdmissionError with the reason."""
    a = SchedAttr(
        ctypes.sizeof(SchedAttr),
        attr.get("policy", SCHED_OTHER),
        attr.get("flags", 0),
        attr.get("nice", 0),
        attr.get("priority", 0),
        attr.get("runtime_ns", 0),
        attr.get("deadline_ns", 0),
        attr.get("period_ns", 0),
    )
    if _libc.syscall(_nr()[0], tid, ctypes.byref(a), 0) == 0:
        return
    e = ctypes.get_errno()
    policy = POLICY_NAMES.get(a.sched_policy, str(a.sched_policy))
    what = f"thread {tid}"
    if e == errno.EBUSY and a.sched_policy == SCHED_DEADLINE:
        raise AdmissionError(
            what,
            f"SCHED_DEADLINE admission control refused runtime {a.sched_runtime / 1e6:g} ms / period "
            f"{a.sched_period / 1e6:g} ms (EBUSY): the deadline tasks' total bandwidth would exceed "
            f"sched_rt_runtime_us/sched_rt_period_us on the CPUs ({_rt_limit()})",
            e,
        )
    if e == errno.EPERM and a.sched_policy == SCHED_DEADLINE:
        hint = "a deadline task must be allowed on every CPU of its root domain (its cpuset is narrower?)"
    elif e == errno.EPERM and a.sched_policy in (SCHED_FIFO, SCHED_RR):
        hint = "with RT_GROUP_SCHED the task's cpu cgroup needs cpu.rt_runtime_us > 0 (and its parents)"
    elif e == errno.EINVAL:
        hint = "invalid parameters (deadline needs runtime <= deadline <= period, >= 1024 ns; fifo priority 1..99)"
    elif e == errno.ESRCH:
        hint = "the thread exited"
    else:
        hint = ""
    raise KnobError(what, f"sched_setattr {policy} failed: {os.strerror(e)}" + (f"; {hint}" if hint else ""), e)


def _rt_limit() -> str:
    try:
        rt = Path("/proc/sys/kernel/sched_rt_runtime_us").read_text().strip()
        period = Path("/proc/sys/kernel/sched_rt_period_us").read_text().strip()
        return f"sched_rt_runtime_us={rt} sched_rt_period_us={period}"
    except OSError:
        return "limits unreadable"


def threads_of(pid: int, descendants: bool = True) -> list[int]:
    """Every thread id of a process and (by default) of its descendant processes."""
    tids: list[int] = []
    todo = [pid]
    seen: set[int] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            tids.extend(int(t) for t in os.listdir(f"/proc/{p}/task"))
        except FileNotFoundError:
            continue
        if descendants:
            for t in os.listdir(f"/proc/{p}/task"):
                try:
                    kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
                except OSError:
                    continue
                todo.extend(int(k) for k in kids)
    return tids


def deadline_attr(
    runtime_ms: float, deadline_ms: float, period_ms: float, reset_on_fork: bool = True
) -> dict[str, int]:
    return {
        "policy": SCHED_DEADLINE,
        "flags": SCHED_FLAG_RESET_ON_FORK if reset_on_fork else 0,
        "runtime_ns": round(runtime_ms * 1e6),
        "deadline_ns": round(deadline_ms * 1e6),
        "period_ns": round(period_ms * 1e6),
    }


def fifo_attr(priority: int, reset_on_fork: bool = True) -> dict[str, int]:
    return {"policy": SCHED_FIFO, "flags": SCHED_FLAG_RESET_ON_FORK if reset_on_fork else 0, "priority": priority}


def describe(attr: dict[str, int]) -> str:
    p = attr.get("policy", 0)
    if p == SCHED_DEADLINE:
        return (
            f"deadline runtime={attr['runtime_ns'] / 1e6:g}ms deadline={attr['deadline_ns'] / 1e6:g}ms "
            f"period={attr['period_ns'] / 1e6:g}ms"
        )
    if p in (SCHED_FIFO, SCHED_RR):
        return f"{POLICY_NAMES[p]} priority={attr.get('priority', 0)}"
    return f"{POLICY_NAMES.get(p, p)} nice={attr.get('nice', 0)}"

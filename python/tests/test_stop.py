"""cohort._stop: a command's main thread waits for SIGTERM/SIGINT with a lock-free handler."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from cohort._stop import StopSignals

CHILD = """
import sys
from cohort._stop import StopSignals
stop = StopSignals()
print("up", flush=True)
print("signal" if stop.wait(60) else "timeout", stop.received, flush=True)
"""


# The signal reaches a thread other than the main one, as a process-directed signal does when
# the kernel picks a native thread (Zenoh's, a socket driver's) that does not block it.
CHILD_OTHER_THREAD = """
import signal, threading, time
from cohort._stop import StopSignals


def kill_self_later():
    time.sleep(0.5)  # the main thread is in its wait by now
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)


stop = StopSignals()
threading.Thread(target=kill_self_later).start()
print("signal" if stop.wait(60) else "timeout", stop.received, flush=True)
"""


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def test_wait_times_out_and_sees_a_signal_that_came_before_it() -> None:
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    old_wakeup = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(old_wakeup)
    stop = StopSignals()
    t0 = time.monotonic()
    assert stop.wait(0.05) is False
    assert time.monotonic() - t0 >= 0.05
    stop.close()
    seen: list[int] = []
    stop = StopSignals(on_signal=seen.append)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5) is True
        assert stop.received == signal.SIGTERM and seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # the stop has begun
    finally:
        stop.close()
    assert {s: signal.getsignal(s) for s in old} == old
    assert signal.set_wakeup_fd(old_wakeup) == old_wakeup


def test_a_signal_taken_by_another_thread_ends_the_wait_at_once() -> None:
    p = subprocess.run(
        [sys.executable, "-c", CHILD_OTHER_THREAD], capture_output=True, text=True, env=child_env(), timeout=30
    )
    assert p.returncode == 0 and p.stdout.split()[:2] == ["signal", str(int(signal.SIGTERM))], (p.stdout, p.stderr)


def test_a_second_sigterm_right_after_the_first_never_hangs_the_wait() -> None:
    """The pattern it replaces (Event.set() in the handler, Event.wait() in the main thread)
    hung 36 of 300 processes given a second SIGTERM 0-100 µs after the first."""
    env = child_env()
    hung = []
    for i in range(120):
        p = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, env=env)
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "up"
        os.kill(p.pid, signal.SIGTERM)
        until = time.perf_counter() + (i % 60) * 2e-6
        while time.perf_counter() < until:
            pass
        os.kill(p.pid, signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            hung.append(i)
            continue
        assert p.returncode == 0 and out.split()[0] == "signal", out
    assert hung == []

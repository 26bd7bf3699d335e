"""TEST DRIVER: runs ``python -m cohort.tune ARGS`` in this process with test hooks.

    python tune_driver.py [--fake-v2 ROOT] [--lock-dir DIR] [--kill-after-journal N]
                          [--kill-in-restore K] [--signals-in-restore] [--record-journal FILE] -- ARGS...

* ``--fake-v2 ROOT``: the tuner sees the fake cgroup v2 tree at ROOT (:mod:`fake_cgroup2`)
  instead of the machine's cgroups;
* ``--kill-after-journal N``: SIGKILL this process right after the Nth journal entry is on
  disk (the change it announces is not made yet);
* ``--kill-in-restore K``: SIGKILL this process when the rollback is about to undo its Kth entry;
* ``--signals-in-restore``: send this process SIGTERM, SIGINT and SIGTERM again when the
  rollback undoes its first entry;
* ``--record-journal FILE``: append every journal entry to FILE as well (to count them).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cohort.tune import runner, system


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fake-v2")
    ap.add_argument("--lock-dir")
    ap.add_argument("--kill-after-journal", type=int)
    ap.add_argument("--kill-in-restore", type=int)
    ap.add_argument("--signals-in-restore", action="store_true")
    ap.add_argument("--record-journal")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    if a.fake_v2:
        from fake_cgroup2 import FakeCgroup2

        fake = FakeCgroup2.attach(Path(a.fake_v2)).install()
        runner.detect = fake.detect  # type: ignore[assignment]
    if a.lock_dir:
        system.LOCK_DIR = a.lock_dir
    appended = 0
    real_append = system.Journal.append

    def append(self: system.Journal, entry: dict) -> None:
        nonlocal appended
        real_append(self, entry)
        appended += 1
        if a.record_journal:
            with open(a.record_journal, "a") as f:
                f.write(json.dumps(entry) + "\n")
        if a.kill_after_journal is not None and appended >= a.kill_after_journal:
            os.kill(os.getpid(), signal.SIGKILL)

    system.Journal.append = append  # type: ignore[method-assign]
    undone = 0
    real_undo = system.undo_entry

    def undo_entry(*args: object, **kw: object) -> None:
        nonlocal undone
        undone += 1
        if a.kill_in_restore is not None and undone >= a.kill_in_restore:
            os.kill(os.getpid(), signal.SIGKILL)
        if a.signals_in_restore and undone == 1:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
                os.kill(os.getpid(), sig)
        real_undo(*args, **kw)  # type: ignore[arg-type]

    system.undo_entry = undo_entry  # type: ignore[assignment]
    from cohort.tune.__main__ import main as tune_main

    return tune_main(args)


if __name__ == "__main__":
    raise SystemExit(main())

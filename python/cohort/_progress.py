"""Progress of a long command, as the Rust CLI shows it (``crates/cohort-cli/src/progress.rs``):
a bar with an ETA on stderr while both outputs are terminals and ``--json`` is off; otherwise one
line per step on stderr, so a log keeps what ran and stdout carries only the report."""

from __future__ import annotations

import sys
from types import TracebackType

from tqdm import tqdm


def interactive(json: bool) -> bool:
    return not json and sys.stdout.isatty() and sys.stderr.isatty()


class Steps:
    """``total`` planned steps; :meth:`begin` reports each as it starts."""

    def __init__(self, label: str, total: int, json: bool) -> None:
        self.label, self.total, self.done, self.begun = label, max(total, 1), 0, False
        self.bar = tqdm(total=self.total, desc=label, file=sys.stderr, leave=False) if interactive(json) else None

    def begin(self, what: str) -> None:
        if self.begun:
            self.done += 1
        self.begun = True
        self.total = max(self.total, self.done + 1)
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.set_postfix_str(what, refresh=False)
            self.bar.update(self.done - self.bar.n)
        else:
            print(f"{self.label}: [{self.done}/{self.total}] {what}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

"""How a batch shows its progress: a `rich` bar with the ETA and counts per status on a terminal, plain lines
(one per finished evaluation) anywhere else (a log file, CI)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from typing import Protocol, TextIO


class BatchProgress(Protocol):
    def start(self, total: int, skipped: int) -> None: ...

    def advance(self, status: str, line: str) -> None:
        """One evaluation finished: its status (or "judge_error"), and a line that describes it."""

    def close(self) -> None: ...


class LineProgress:
    """A line per finished evaluation."""

    def __init__(self, stream: TextIO | None = None, write: Callable[[str], None] | None = None):
        self.write = write or (lambda line: print(line, file=stream or sys.stderr, flush=True))

    @classmethod
    def calling(cls, write: Callable[[str], None]) -> LineProgress:
        return cls(write=write)

    def start(self, total: int, skipped: int) -> None:
        pass

    def advance(self, status: str, line: str) -> None:
        self.write(line)

    def close(self) -> None:
        pass


class RichProgress:
    """A live bar: done/total, elapsed, ETA, and how many ended in each status; judge errors printed above it."""

    def __init__(self, stream: TextIO | None = None):
        from rich import progress as rp
        from rich.console import Console

        self.counts: Counter[str] = Counter()
        self.bar = rp.Progress(
            rp.TextColumn("[bold]batch"), rp.BarColumn(), rp.MofNCompleteColumn(), rp.TimeElapsedColumn(),
            rp.TextColumn("ETA"), rp.TimeRemainingColumn(), rp.TextColumn("{task.fields[counts]}"),
            console=Console(file=stream or sys.stdout))
        self.task = None

    def start(self, total: int, skipped: int) -> None:
        self.bar.start()
        self.task = self.bar.add_task("batch", total=total, counts=f"{skipped} already done" if skipped else "")

    def advance(self, status: str, line: str) -> None:
        self.counts[status] += 1
        if status == "judge_error":
            self.bar.console.print(line, markup=False, highlight=False)
        counts = " ".join(f"{name} {n}" for name, n in self.counts.most_common())
        self.bar.update(self.task, advance=1, counts=counts)

    def close(self) -> None:
        self.bar.stop()


def default_progress() -> BatchProgress:
    """The bar when stdout is a terminal, plain lines on stderr otherwise."""
    return RichProgress() if sys.stdout.isatty() else LineProgress()

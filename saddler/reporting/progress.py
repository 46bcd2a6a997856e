"""Progress reporting for long phases (rollouts): done / total, rollouts per second, ETA.

`make_progress(quiet)` gives a `RichProgress` bar on a terminal and a silent `NullProgress` under
`--quiet`, when output is not a terminal (pipes, CI logs, tests). `ProgressMeter` holds the arithmetic
with an injected clock so rates and ETAs are testable.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
from rich.progress import Progress as _RichBar

from saddler.ports import Progress

Clock = Callable[[], float]
__all__ = ["NullProgress", "Progress", "ProgressMeter", "RichProgress", "make_progress"]


class ProgressMeter:
    """Counts done/total since `start`; rate (units/s) and ETA (s) from the injected monotonic clock."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.total = 0
        self.done = 0
        self.label = ""
        self._t0 = clock()

    def start(self, total: int, label: str) -> None:
        self.total, self.done, self.label, self._t0 = total, 0, label, self.clock()

    def advance(self, n: int = 1) -> None:
        self.done += n

    def extend(self, n: int, label: str) -> None:
        """`n` more units in the phase under way (a new one, when the last ended), now called `label`."""
        if self.done >= self.total:
            self.start(n, label)
        else:
            self.total, self.label = self.total + n, label

    @property
    def elapsed(self) -> float:
        return max(0.0, self.clock() - self._t0)

    @property
    def rate(self) -> float:
        """Units per second so far (0 before anything is done)."""
        elapsed = self.elapsed
        return self.done / elapsed if self.done and elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate; None while unknown."""
        if self.done >= self.total:
            return 0.0
        rate = self.rate
        return (self.total - self.done) / rate if rate > 0 else None

    def describe(self) -> str:
        """`label done/total rate/s ETA m:ss`, the line a progress display shows."""
        eta = self.eta
        eta_text = "?" if eta is None else f"{int(eta) // 60}:{int(eta) % 60:02d}"
        return f"{self.label} {self.done}/{self.total} {self.rate:.1f}/s ETA {eta_text}".strip()


class NullProgress:
    """Reports nothing (quiet mode, non-terminals, tests); still counts, so callers can read the meter."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.meter = ProgressMeter(clock)
        self.notes: list[str] = []

    def start(self, total: int, label: str) -> None:
        self.meter.start(total, label)

    def advance(self, n: int = 1) -> None:
        self.meter.advance(n)

    def extend(self, n: int, label: str) -> None:
        self.meter.extend(n, label)

    def finish(self) -> None:
        return None

    def note(self, text: str) -> None:
        self.notes.append(text)


class RichProgress:
    """A rich progress bar per phase: label, bar, done/total, rollouts/s and ETA; notes print above it."""

    def __init__(self, console: Console | None = None, clock: Clock = time.monotonic) -> None:
        self.console = console or Console(stderr=True)
        self.meter = ProgressMeter(clock)
        self._bar: _RichBar | None = None
        self._task: object = None

    def start(self, total: int, label: str) -> None:
        self.finish()
        self.meter.start(total, label)
        self._bar = _RichBar(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            console=self.console,
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task(label, total=total, stats=self._stats())

    def _stats(self) -> str:
        eta = self.meter.eta
        eta_text = "?" if eta is None else f"{int(eta) // 60}:{int(eta) % 60:02d}"
        return f"{self.meter.rate:.1f} rollouts/s  ETA {eta_text}"

    def advance(self, n: int = 1) -> None:
        self.meter.advance(n)
        if self._bar is not None:
            self._bar.update(self._task, advance=n, stats=self._stats())  # type: ignore[arg-type]

    def extend(self, n: int, label: str) -> None:
        if self._bar is None:
            self.start(n, label)
            return
        self.meter.extend(n, label)
        self._bar.update(self._task, total=self.meter.total, description=label)  # type: ignore[arg-type]

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.refresh()
            self._bar.stop()
            self._bar = None

    def note(self, text: str) -> None:
        self.console.print(text, highlight=False)


def make_progress(quiet: bool, console: Console | None = None) -> Progress:
    """`RichProgress` on a terminal unless `quiet`; otherwise `NullProgress`."""
    console = console or Console(stderr=True)
    if quiet or not console.is_terminal:
        return NullProgress()
    return RichProgress(console)

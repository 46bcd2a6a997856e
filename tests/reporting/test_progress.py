"""Progress: the meter's arithmetic with an injected clock, quiet vs terminal selection, rich rendering."""

from __future__ import annotations

import io

from rich.console import Console

from saddler.reporting.progress import NullProgress, ProgressMeter, RichProgress, make_progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_meter_rate_and_eta() -> None:
    clock = FakeClock()
    meter = ProgressMeter(clock)
    meter.start(200, "n1 train")
    assert (meter.rate, meter.eta) == (0.0, None)
    assert meter.describe() == "n1 train 0/200 0.0/s ETA ?"
    clock.now += 10
    meter.advance(50)
    assert meter.rate == 5.0
    assert meter.eta == 30.0
    assert meter.describe() == "n1 train 50/200 5.0/s ETA 0:30"
    clock.now += 30
    meter.advance(150)
    assert meter.eta == 0.0
    assert meter.describe() == "n1 train 200/200 5.0/s ETA 0:00"


def test_quiet_and_non_terminal_are_silent() -> None:
    buf = io.StringIO()
    assert isinstance(make_progress(quiet=True, console=Console(file=buf, force_terminal=True)), NullProgress)
    assert isinstance(make_progress(quiet=False, console=Console(file=buf, force_terminal=False)), NullProgress)
    progress = make_progress(quiet=False, console=Console(file=buf, force_terminal=False))
    progress.start(3, "x")
    progress.advance()
    progress.note("hello")
    progress.finish()
    assert buf.getvalue() == ""


def test_terminal_gets_a_rich_bar_with_counts_rate_and_eta() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120, color_system=None)
    progress = make_progress(quiet=False, console=console)
    assert isinstance(progress, RichProgress)
    clock = FakeClock()
    progress.meter.clock = clock
    progress.start(4, "n3 dev")
    clock.now += 2
    progress.advance(2)
    clock.now += 2
    progress.advance(2)
    progress.finish()
    progress.note("2 cached")
    out = buf.getvalue()
    assert "n3 dev" in out
    assert "4/4" in out
    assert "1.0 rollouts/s" in out
    assert "ETA 0:00" in out
    assert out.rstrip().endswith("2 cached")

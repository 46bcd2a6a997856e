"""The end of a run with a plot helper process (`saddler run` starts one): the plot it draws is the run's
progress.png; when it fails, the run says so and draws the plot itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evodag.store import EvoDAG
from saddler.reporting.plot_process import PlotProcess
from saddler.run.loop import Optimizer

pytestmark = pytest.mark.slow


class FailingHelper(PlotProcess):
    """A helper whose child exits at once: asked to draw, it has drawn nothing."""

    def start(self, db: Path, png: Path, run_id: int) -> bool:
        assert self._proc is not None
        self._proc.kill()
        self._proc.wait()
        self._asked = True
        return True


class RecordingHelper(PlotProcess):
    """A helper that notes how many test rollouts the store held when it was asked to draw."""

    test_rollouts_at_start: int | None = None

    def start(self, db: Path, png: Path, run_id: int) -> bool:
        with EvoDAG(db, readonly=True) as store:
            self.test_rollouts_at_start = len(store.rollouts(run_id, split="test"))
        return super().start(db, png, run_id)


def _run(tmp_path: Path, helper: PlotProcess, make_run: Callable[..., Path]) -> tuple[Path, list[str]]:
    run = make_run(tmp_path / "run", loop={"max_iterations": 1, "test_runs": 1})
    said: list[str] = []
    try:
        Optimizer(run, quiet=True, say=said.append, plotter=helper).run()
    finally:
        helper.close()
    return run, said


def test_the_helper_draws_the_runs_plot(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run, said = _run(tmp_path, PlotProcess(), make_run)
    assert (run / "progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not any("plot helper" in line for line in said)
    assert not list(run.glob(".progress.png*"))


def test_the_helper_draws_while_test_is_evaluated(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    """The plot shows search progress only, so it is asked for before the test rollouts run, not after them."""
    helper = RecordingHelper()
    run, _ = _run(tmp_path, helper, make_run)
    assert helper.test_rollouts_at_start == 0
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert len(store.rollouts(split="test")) > 0
    assert (run / "progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_failed_helper_is_said_and_the_plot_is_drawn_here(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run, said = _run(tmp_path, FailingHelper(), make_run)
    assert (run / "progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [line for line in said if "plot helper" in line] == [
        "the plot helper process failed (exit -9); drawing the plot here"
    ]
    assert not list(run.glob(".progress.png*"))

"""The end of a run with a plot helper process (`saddler run` starts one): the plot it draws is the run's
progress.png; when it fails, the run says so and draws the plot itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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


def test_a_failed_helper_is_said_and_the_plot_is_drawn_here(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run, said = _run(tmp_path, FailingHelper(), make_run)
    assert (run / "progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [line for line in said if "plot helper" in line] == [
        "the plot helper process failed (exit -9); drawing the plot here"
    ]
    assert not list(run.glob(".progress.png*"))

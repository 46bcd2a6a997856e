"""The progress plot: its series (exact, from the fixture's rollout ids) and the PNG it writes."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from evodag.store import EvoDAG
from saddler.reporting.plot import plot_progress, progress_series

if TYPE_CHECKING:
    from plugins.reports import Fixture


@pytest.fixture(scope="module")
def finished(
    tmp_path_factory: pytest.TempPathFactory, build_run: Callable[..., Any], open_store: Callable[[Any], Any]
) -> tuple[EvoDAG, Fixture]:
    store, clock = open_store(tmp_path_factory.mktemp("plot") / "evodag.db")
    return store, build_run(store, clock)


def test_series_uses_cumulative_rollouts_at_each_event(finished: tuple[EvoDAG, Fixture]) -> None:
    store, fx = finished
    data = progress_series(store)
    ids = fx.ids
    # rollout ids: N1 dev 1-4 | it1 N1 5-7, N2 8-10, N2 dev 11-14 | it2 N2 15-17, N3 18-20 | it3 N2 21-22 |
    # it4 N5 23-25, dev 26-29 | it5 N5 30-32, N6 33-35, dev 36-39 | it6 N7 dev 40-43, N7 44-46, N8 47-49 |
    # it7 N9 dev 50-53, N7 54-56 | it8 N7 57-58, N10 59-61 | test 62-85: not search progress, not counted
    assert data["name"] == "fixture-run" and data["total"] == 61
    assert data["dev"] == [
        (4, 0.5, 0.5, ids["N1"]),
        (14, 0.75, 0.75, ids["N2"]),
        (29, 0.5, 0.75, ids["N5"]),
        (39, 0.75, 0.75, ids["N6"]),
        (43, 1.0, 1.0, ids["N7"]),
        (53, 0.75, 1.0, ids["N9"]),
    ]
    third, two = 1 / 3, 2 / 3
    # invalid (it3) and no-patch (it7) iterations show the parent's batch score, computed from its rollouts
    assert data["batch"] == [
        (10, third, two, "accepted", 1),
        (20, third, third, "rejected", 2),
        (22, third, None, "invalid", 3),
        (25, third, 1.0, "accepted", 4),
        (35, third, two, "accepted", 5),
        (49, two, third, "rejected", 6),
        (56, 1.0, None, "no_patch", 7),
        (61, third, third, "neutral", 8),
    ]


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_png_is_written_with_the_agg_backend(finished: tuple[EvoDAG, Fixture], tmp_path: Path) -> None:
    store, fx = finished
    path = plot_progress(store, tmp_path / "sub" / "progress.png", run_id=fx.run_id)
    assert path == tmp_path / "sub" / "progress.png"
    width, height = _png_size(path)
    assert width >= 800 and height >= 500
    assert path.stat().st_size > 20_000  # two panels with lines, markers and legends


def test_the_plot_draws_on_an_agg_canvas_without_pyplot(finished: tuple[EvoDAG, Fixture], tmp_path: Path) -> None:
    """pyplot (its figure manager and backend switching) costs a run start-up time for nothing: a `Figure` with an
    Agg canvas draws the same PNG, and the process's matplotlib backend is left alone."""
    store, fx = finished
    script = (
        "import sys\n"
        "from evodag.store import EvoDAG\n"
        "from saddler.reporting.plot import plot_progress\n"
        f"with EvoDAG({str(store.path)!r}, readonly=True) as store:\n"
        f"    plot_progress(store, {str(tmp_path / 'p.png')!r}, run_id={fx.run_id})\n"
        "wanted = ('matplotlib.pyplot', 'matplotlib.backends.backend_agg')\n"
        "print(sorted(m for m in sys.modules if m in wanted))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['matplotlib.backends.backend_agg']"
    assert _png_size(tmp_path / "p.png") == _png_size(plot_progress(store, tmp_path / "q.png", run_id=fx.run_id))


def test_plot_of_a_run_with_only_a_baseline(tmp_path: Path, open_store: Callable[[Any], Any]) -> None:
    store, _ = open_store(tmp_path / "evodag.db")
    run = store.create_run({"name": "empty"}, seed=0)
    store.add_node(run.id, "a" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline")
    assert progress_series(store) == {"name": "empty", "total": 0, "dev": [], "batch": []}
    width, _ = _png_size(plot_progress(store, tmp_path / "progress.png"))
    assert width >= 800


@pytest.mark.parametrize(("kind", "measure", "expected"), [
    ("pass_rate", "sequential", 0.5), ("mean_score", "sequential", 0.75), ("mean_score", "pass_count", 0.5),
])  # fmt: skip
def test_an_iteration_without_a_candidate_shows_its_parents_batch_score_as_acceptance_scores_it(
    tmp_path: Path, open_store: Callable[[Any], Any], kind: str, measure: str, expected: float
) -> None:
    """Graded rollouts that pass less often than they score: the plot's before-only point is on the scale the
    batch series is on (acceptance's `before`), not a mean graded score on a pass-rate run."""
    store, _ = open_store(tmp_path / "evodag.db")
    run = store.create_run({"name": "graded", "policies": {"score": kind, "acceptance": measure}}, seed=1)
    base = store.add_node(run.id, "a" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline")
    scores = {"tr-1": (0.75, 0.25), "tr-2": (1.0, 1.0)}  # per repetition; passed only at 1.0
    for task, reps in scores.items():
        for rep, score in enumerate(reps):
            store.add_rollout(
                run_id=run.id, node_id=base.id, task_id=task, split="train", seed=1000, repetition=rep,
                score=score, passed=score == 1.0, disposition="success" if score == 1.0 else "task_failure",
                cost=0.0, trace_path="", task_group="g", cache_key=f"{task}:{rep}",
            )  # fmt: skip
    it = store.start_iteration(run.id, 1, 0, list(scores), phase="capability", parent_id=base.id)
    store.update_iteration(it.id, decision="no_patch", step="done")
    assert [point[1] for point in progress_series(store)["batch"]] == [pytest.approx(expected)]

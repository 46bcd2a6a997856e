"""The progress plot: best dev score so far, and each iteration's batch score before/after, against rollouts.

x = cumulative search rollouts at an event = the number of the run's train and dev rollout rows with id <= the last
rollout id involved in it (for a dev evaluation: the node's dev rollouts; for an iteration: the first evaluation of
the candidate and of its parent on the iteration's batch). Test rollouts are not search progress and are not
counted, so the plot is final, and can be drawn, before test is evaluated. An iteration without a batch score on its
candidate (invalid, no patch) shows its parent's batch score, computed from the rollouts by acceptance's
`batch_score` under the run's recorded `policies.score` and `policies.acceptance`.
matplotlib is imported lazily; the figure draws on its own Agg canvas (no pyplot: no figure manager to close, no
backend switched for the whole process, and a shorter import).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from pathlib import Path
from typing import Any

from evodag.models import RolloutRow
from evodag.store import EvoDAG
from saddler import scoring
from saddler.policies.acceptance import batch_score, recorded_measure, task_outcomes

PLOT_NAME = "progress.png"
"""The progress plot's file in the run folder."""

MARKERS = {  # decision -> (marker, colour, label)
    "accepted": ("^", "tab:green", "accepted"),
    "neutral": ("s", "tab:blue", "neutral"),
    "rejected": ("v", "tab:red", "rejected"),
    "invalid": ("x", "black", "invalid (before only)"),
    "no_patch": ("D", "tab:orange", "no patch (before only)"),
    "no_training_failures": ("o", "tab:gray", "all passed, no diagnosis (before only)"),
}
BEFORE_ONLY = ("invalid", "no_patch", "no_training_failures")


def _first_eval(rows: list[RolloutRow], tasks: set[str]) -> list[RolloutRow]:
    """The earliest row of each (task, seed, repetition) in `tasks`: the node's first evaluation on them."""
    first: dict[tuple[str, int, int], RolloutRow] = {}
    for row in rows:
        key = (row.task_id, row.seed, row.repetition)
        if row.task_id in tasks and (key not in first or row.id < first[key].id):
            first[key] = row
    return list(first.values())


def progress_series(store: EvoDAG, run_id: int | None = None) -> dict[str, Any]:
    """The plot's data: {"name", "total", "dev": [(x, dev, best_so_far, node)], "batch": [(x, before, after,
    decision, iteration)]}, each list ordered by x."""
    run = store.get_run(run_id)
    kind, measure = scoring.recorded_score_kind(run.config, run.inputs), recorded_measure(run.config, run.inputs)
    rows = [row for row in store.rollouts(run.id) if row.split != "test"]
    ids = sorted(r.id for r in rows)
    by_node: dict[tuple[int, str], list[RolloutRow]] = defaultdict(list)
    for row in rows:
        by_node[(row.node_id, row.split)].append(row)

    def cumulative(last_id: int) -> int:
        return bisect.bisect_right(ids, last_id)

    dev_points = []
    for node in store.nodes(run.id):
        dev_ids = [r.id for r in by_node.get((node.id, "dev"), [])]
        if node.dev_mean is not None and dev_ids:
            dev_points.append((cumulative(max(dev_ids)), node.dev_mean, node.id))
    dev_points.sort()
    dev: list[tuple[int, float, float, int]] = []
    best = float("-inf")
    for x, score, node_id in dev_points:
        best = max(best, score)
        dev.append((x, score, best, node_id))

    batch = []
    for it in store.iterations(run.id):
        cand = store.get_node(it.candidate_id) if it.candidate_id is not None else None
        parent = it.parent_id if it.parent_id is not None else (cand.parent_id if cand else None)
        tasks = set(it.batch)
        parent_rows = _first_eval(by_node.get((parent, "train"), []), tasks) if parent is not None else []
        cand_rows = _first_eval(by_node.get((cand.id, "train"), []), tasks) if cand else []
        if not parent_rows and not cand_rows:
            continue
        before = (
            cand.batch_before
            if cand and cand.batch_before is not None
            else batch_score(task_outcomes(parent_rows), kind, measure)
        )
        after = cand.batch_after if cand else None
        decision = cand.status if cand and cand.status in MARKERS else (it.decision or "")
        x = cumulative(max(r.id for r in parent_rows + cand_rows))
        batch.append((x, before, after, decision, it.number))
    batch.sort(key=lambda b: (b[0], b[4]))
    return {"name": str(run.config.get("name", "run")), "total": len(ids), "dev": dev, "batch": batch}


def plot_progress(store: EvoDAG, path: Path, run_id: int | None = None) -> Path:
    """Draw `progress_series` to the PNG `path` (two stacked panels sharing the rollouts axis); returns it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    data = progress_series(store, run_id)
    fig = Figure(figsize=(12.5, 6.5))
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    if data["dev"]:
        xs = [p[0] for p in data["dev"]] + [max(data["total"], data["dev"][-1][0])]
        best = [p[2] for p in data["dev"]]
        top.step(xs, [*best, best[-1]], where="post", color="tab:green", linewidth=2, label="best dev so far")
        top.scatter(
            [p[0] for p in data["dev"]],
            [p[1] for p in data["dev"]],
            s=18,
            color="tab:gray",
            zorder=3,
            label="dev evaluation",
        )
        top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    else:
        top.text(0.5, 0.5, "no dev evaluations yet", ha="center", va="center", transform=top.transAxes)
    top.set_ylabel("dev score")
    top.grid(alpha=0.3)
    for x, before, after, _, _ in data["batch"]:
        if before is not None and after is not None:
            bottom.plot([x, x], [before, after], color="lightgray", linewidth=1, zorder=1)
    befores = [(b[0], b[1]) for b in data["batch"] if b[1] is not None]
    if befores:
        bottom.scatter(*zip(*befores, strict=True), facecolors="none", edgecolors="gray", s=24, label="batch before")
    for decision, (marker, colour, label) in MARKERS.items():
        if decision in BEFORE_ONLY:
            pts = [(b[0], b[1]) for b in data["batch"] if b[3] == decision and b[1] is not None]
        else:
            pts = [(b[0], b[2]) for b in data["batch"] if b[3] == decision and b[2] is not None]
        if pts:
            bottom.scatter(*zip(*pts, strict=True), marker=marker, color=colour, s=30, zorder=3, label=label)
    if data["batch"]:
        bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    bottom.set_ylabel("batch score")
    bottom.set_xlabel("cumulative search rollouts (train + dev)")
    bottom.grid(alpha=0.3)
    values = [v for p in data["dev"] for v in p[1:3]] + [v for b in data["batch"] for v in b[1:3] if v is not None]
    lo, hi = min([0.0, *values]), max([1.0, *values])
    for ax in (top, bottom):
        ax.set_ylim(lo - 0.05, hi + 0.05)
    bottom.set_xlim(left=0, right=max(1, data["total"]) * 1.02)
    fig.suptitle(f"saddler progress: {data['name']}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # fixed margins with room for the legends on the right: `bbox_inches="tight"` would draw the figure twice
    fig.subplots_adjust(left=0.065, right=0.755, top=0.92, bottom=0.09, hspace=0.08)
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    return path

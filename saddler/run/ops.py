"""Operations a person runs on a run folder outside the loop: evaluate a node, export a node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.errors import RunStateError
from saddler.reporting.progress import make_progress
from saddler.run.context import open_context
from saddler.run.folder import RunPaths, run_lock
from saddler.run.outcomes import split_seeds
from saddler.scoring import node_score


def evaluate_node(run_dir: Path, node_id: int, split: str, runs: int, quiet: bool = False) -> dict[str, Any]:
    """The run's score (Pass@1, or the mean graded score under `mean_score`) of node `node_id` on `split` over
    `runs` seeded runs; rollouts are stored (and reused)."""
    return evaluate_nodes(run_dir, [node_id], split, runs, quiet)[node_id]


def evaluate_nodes(
    run_dir: Path, node_ids: list[int], split: str, runs: int, quiet: bool = False, score_kind: str | None = None
) -> dict[int, dict[str, Any]]:
    """`evaluate_node` for several nodes with the run opened once: node id -> its figures, scored by `score_kind`
    (`pass_rate` or `mean_score`; None: the run's own)."""
    paths = RunPaths(Path(run_dir).resolve())
    cfg = load_run_config(paths.root)
    out: dict[int, dict[str, Any]] = {}
    with run_lock(paths.root), EvoDAG(paths.db) as store:  # it writes rollouts and prunes worktrees: not mid-run
        ctx = open_context(paths, cfg, store, make_progress(quiet))
        try:
            for node_id in node_ids:
                node = store.get_node(node_id)
                rows = ctx.evaluator.evaluate(node, ctx.tasks[split], split, split_seeds(cfg.seed, split, runs))
                kind = score_kind or ctx.score_kind
                score = node_score(rows, kind)
                out[node_id] = {
                    "node_id": node_id,
                    "split": split,
                    "score": kind,
                    "mean": score.mean,
                    "std": score.std,
                    "runs": list(score.per_run),
                    "executed": ctx.evaluator.executed_count,
                }
        finally:
            ctx.executor.close()
    return out


def export_node(run_dir: Path, node_id: int | None, dest: Path) -> dict[str, Any]:
    """Export `node_id` (default: the run's best node) with `saddler.harness.export.export_harness`."""
    from saddler.harness.export import export_harness
    from saddler.harness.space import HarnessSpace

    paths = RunPaths(Path(run_dir).resolve())
    cfg = load_run_config(paths.root)
    with EvoDAG(paths.db, readonly=True) as store:
        target = node_id if node_id is not None else store.get_run().best_node_id
        if target is None:
            raise RunStateError("the run has no best node yet; run it first with `saddler run DIR`")
        space = HarnessSpace(paths.harness(cfg.harness), paths.worktrees)
        return export_harness(space, store, store.get_node(target).id, Path(dest))

"""Ranking: which node is the answer. Chosen by `policies.ranking`; the loop stores its pick in `runs.best_node_id`
whenever it changes, and every reader (`evo-dag best`, report, status, export, the end of the run) reads that.

- `best_dev` (default): the kept node (baseline, accepted, neutral) with the best dev mean; ties go to the
  smaller change (fewer lines against the baseline), then the older node. While no kept node has a dev score
  (dev evaluation `never`, the no-selection ablation) it is the latest kept node, as a greedy search returns.
- `latest_kept`: the latest kept node, whatever dev says (greedy keep/discard search returns its last keep).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from evodag.decisions import KEPT_STATUSES
from evodag.models import Node

RankingName = Literal["best_dev", "latest_kept"]


def pick_best_dev(nodes: Sequence[Node]) -> Node | None:
    scored = [n for n in nodes if n.dev_mean is not None and n.status in KEPT_STATUSES]
    if scored:
        return min(scored, key=lambda n: (-round(n.dev_mean or 0.0, 9), n.lines_changed, n.id))
    return pick_latest_kept(nodes)


def pick_latest_kept(nodes: Sequence[Node]) -> Node | None:
    kept = [n for n in nodes if n.status in KEPT_STATUSES]
    return max(kept, key=lambda n: n.id) if kept else None


RANKINGS: dict[str, Callable[[Sequence[Node]], Node | None]] = {
    "best_dev": pick_best_dev,
    "latest_kept": pick_latest_kept,
}


def make_ranking(name: str) -> Callable[[Sequence[Node]], Node | None]:
    """The ranking function named `name` (see the module docstring)."""
    return RANKINGS[name]


def pick_best(nodes: Sequence[Node]) -> Node | None:
    """The default ranking (`best_dev`)."""
    return pick_best_dev(nodes)

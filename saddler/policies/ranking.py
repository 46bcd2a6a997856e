"""Ranking: which node is the answer. Chosen by `policies.ranking`; the loop stores its pick in `runs.best_node_id`
whenever it changes, and every reader (`evo-dag best`, report, status, export, the end of the run) reads that.

- `best_dev` (default): the kept node (baseline, accepted, neutral) with the best dev mean over the whole dev split
  (a node whose dev race stopped early, `Node.dev_tasks`, cannot be the answer). On a tie, a node
  an `accepted` descendant of which is tied too gives way to it: each acceptance on the way showed train strictly
  better and dev not worse, so the descendant is the better evidenced harness. The remaining ties go to the
  smaller change (fewer lines against the baseline), then the older node. While no kept node has a dev score
  (dev evaluation `never`, the no-selection ablation) it is the latest kept node, as a greedy search returns.
- `latest_kept`: the latest kept node, whatever dev says (greedy keep/discard search returns its last keep).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from evodag.decisions import ACCEPTED, KEPT_STATUSES
from evodag.models import Node

RankingName = Literal["best_dev", "latest_kept"]


def pick_best_dev(nodes: Sequence[Node]) -> Node | None:
    scored = [n for n in nodes if n.dev_mean is not None and n.dev_tasks is None and n.status in KEPT_STATUSES]
    if not scored:
        return pick_latest_kept(nodes)
    top = max(round(n.dev_mean or 0.0, 9) for n in scored)
    tied = [n for n in scored if round(n.dev_mean or 0.0, 9) == top]
    parents = {n.id: n.parent_id for n in nodes}
    outranked = {a for n in tied if n.status == ACCEPTED for a in _ancestors(n.id, parents)}
    return min((n for n in tied if n.id not in outranked), key=lambda n: (n.lines_changed, n.id))


def _ancestors(node_id: int, parents: dict[int, int | None]) -> set[int]:
    out: set[int] = set()
    parent = parents.get(node_id)
    while parent is not None and parent not in out:
        out.add(parent)
        parent = parents.get(parent)
    return out


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

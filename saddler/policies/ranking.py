"""Ranking: which node is the answer.

Best dev mean; ties go to the smaller change (fewer lines against the baseline), then the older node.
With no dev scores at all (dev evaluation `never`, the no-selection ablation) the answer is the
latest kept node, as a greedy search would return.
"""

from __future__ import annotations

from collections.abc import Sequence

from evodag.models import Node

KEPT = ("baseline", "accepted", "neutral")


def pick_best(nodes: Sequence[Node]) -> Node | None:
    scored = [n for n in nodes if n.dev_mean is not None and n.status in KEPT]
    if scored:
        return min(scored, key=lambda n: (-round(n.dev_mean or 0.0, 9), n.lines_changed, n.id))
    kept = [n for n in nodes if n.status in KEPT]
    return max(kept, key=lambda n: n.id) if kept else None

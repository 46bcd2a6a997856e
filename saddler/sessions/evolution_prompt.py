"""What an evolution prompt shows of its `EvolutionRequest`: `evolution_values` fills the `evolution` template's own
placeholders with the nodes, edges, lineages, failing tasks, tried actions and allowed bases of the DAG.

Long lists are bounded so a prompt is as long at 10,000 nodes as at 100: it lists the nodes and edges that
matter (the current and best nodes with their nearest ancestors, the best kept nodes, the latest ones, edges with
attributed lessons), the latest lineage edges and tried actions, with a count of the rest, and names the `evo-dag`
commands that show it.
"""

from __future__ import annotations

import json

from evodag.decisions import KEPT_STATUSES
from saddler.sessions.schema import EvolutionRequest, NodeInfo

_MAX_KEPT_NODES = 15
_MAX_RECENT_NODES = 10
_MAX_LINEAGE_NODES = 10
_MAX_LINEAGE_EDGES = 30
_MAX_SIGNAL_EDGES = 15
_MAX_TRIED_ACTIONS = 20


def _listed_nodes(req: EvolutionRequest) -> list[NodeInfo]:
    """The nodes worth showing, as many at any size of the DAG: the current and best nodes with their nearest
    ancestors (`_MAX_LINEAGE_NODES` each, and the root), the best kept nodes by dev, the latest others (the
    frontier); in id order."""
    by_id = {n.node_id: n for n in req.nodes}
    pinned = {req.current_node_id, req.best_node_id}
    for node_id in (req.current_node_id, req.best_node_id):
        for _ in range(_MAX_LINEAGE_NODES):
            if node_id not in by_id or by_id[node_id].parent_id is None:
                break
            node_id = by_id[node_id].parent_id  # type: ignore[assignment]
            pinned.add(node_id)
    pinned |= {n.node_id for n in req.nodes if n.parent_id is None}
    kept = sorted((n for n in req.nodes if n.status in KEPT_STATUSES), key=lambda n: (-(n.dev_mean or -1.0), n.node_id))
    pinned |= {n.node_id for n in kept[:_MAX_KEPT_NODES]}
    others = sorted((n for n in req.nodes if n.status not in KEPT_STATUSES), key=lambda n: -n.node_id)
    pinned |= {n.node_id for n in others[:_MAX_RECENT_NODES]}
    return [n for n in req.nodes if n.node_id in pinned]


def evolution_values(req: EvolutionRequest) -> dict[str, str]:
    """The placeholders of the evolution template that come from the request (`render` adds the shared ones)."""
    listed = _listed_nodes(req)
    shown = {n.node_id for n in listed}
    nodes = [
        f"- node {n.node_id} (parent {n.parent_id}, iteration {n.iteration}): {n.status}, origin {_cut(n.origin)}, "
        f"dev {_num(n.dev_mean)}, batch {_num(n.batch_after)}, {n.lines_changed} lines changed"
        for n in listed
    ]
    if len(listed) < len(req.nodes):
        statuses: dict[str, int] = {}
        for n in req.nodes:
            if n.node_id not in shown:
                statuses[n.status] = statuses.get(n.status, 0) + 1
        rest = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
        nodes.insert(
            0,
            f"(showing {len(listed)} of {len(req.nodes)} nodes: the current and best nodes with their nearest "
            f"ancestors, the best kept nodes by dev and the latest; not shown: {rest}; `evo-dag node ID` and "
            "`evo-dag lineage ID` show any node)",
        )
    signal = [e for e in req.edges if e.true_fixes or e.true_regressions][-_MAX_SIGNAL_EDGES:]
    keep = {e.edge_id for e in signal} | {e.edge_id for e in req.edges if e.child_id in shown}
    listed_edges = [e for e in req.edges if e.edge_id in keep]
    edges = [
        f"- edge {e.edge_id}: {e.parent_id} -> {e.child_id} ({e.kind}, {_cut(e.origin)}, "
        f"child {e.child_status or '-'}), "
        f"files {', '.join(e.files) or '-'}; fixed {_ids(e.fixed)}; regressed {_ids(e.regressed)}; "
        f"true fixes {_ids(e.true_fixes)}; true regressions {_ids(e.true_regressions)}"
        for e in listed_edges
    ]
    if len(listed_edges) < len(req.edges):
        edges.insert(
            0,
            f"(showing {len(listed_edges)} of {len(req.edges)} edges: those into the nodes above and the latest with "
            "attributed lessons; `evo-dag edge A B` shows any edge)",
        )
    lineage = {
        str(k): v
        if len(v) <= _MAX_LINEAGE_EDGES
        else [f"{len(v) - _MAX_LINEAGE_EDGES} earlier", *v[-_MAX_LINEAGE_EDGES:]]
        for k, v in req.lineage_edge_ids.items()
    }
    bases = [i for i in req.allowed_base_ids if i in shown]
    hidden = len(req.allowed_base_ids) - len(bases)
    allowed = ", ".join(str(i) for i in bases) + (
        f" (and {hidden} more not listed above: any kept node)" if hidden else ""
    )
    tried = req.tried_actions[-_MAX_TRIED_ACTIONS:]
    tried_text = ", ".join(tried) + (
        f" (and {len(req.tried_actions) - len(tried)} earlier ones)" if len(tried) < len(req.tried_actions) else ""
    )
    return {
        "current_node_id": str(req.current_node_id),
        "best_node_id": str(req.best_node_id),
        "nodes": "\n".join(nodes) or "(none)",
        "edges": "\n".join(edges) or "(none)",
        "lineage": json.dumps(lineage, sort_keys=True),
        "failing": json.dumps({str(k): v for k, v in req.failing_train_tasks.items()}, sort_keys=True),
        "tried_actions": tried_text or "(none)",
        "allowed_bases": allowed if req.allowed_base_ids else "(any node listed above)",
    }


def _cut(origin: str, limit: int = 60) -> str:
    return "-" if not origin else (origin if len(origin) <= limit else origin[: limit - 1] + "…")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ids(values: list[str]) -> str:
    return ", ".join(values) or "-"

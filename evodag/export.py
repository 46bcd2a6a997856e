"""Whole-DAG exports: json, graphml (networkx), dot (Graphviz) and mermaid text."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from evodag.codec import as_dict
from evodag.errors import InvalidValueError
from evodag.models import Edge, Node

if TYPE_CHECKING:
    from evodag.store import EvoDAG

FORMATS = ("json", "graphml", "dot", "mermaid")
STATUS_COLORS = {
    "baseline": "lightblue", "accepted": "palegreen", "neutral": "khaki", "pending": "white",
    "rejected": "lightpink", "invalid": "lightgrey",
}  # fmt: skip


def _label(node: Node) -> str:
    dev = "" if node.dev_mean is None else f" dev {node.dev_mean:.3f}"
    return f"#{node.id} {node.status}{dev}"


def _json(nodes: list[Node], edges: list[Edge], run_id: int | None) -> str:
    doc = {"run_id": run_id, "nodes": [as_dict(n) for n in nodes], "edges": [as_dict(e) for e in edges]}
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _flat(record: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in as_dict(record).items():
        if value is None:
            continue
        out[key] = json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value
    return out


def _graphml(nodes: list[Node], edges: list[Edge]) -> str:
    import networkx as nx

    g = nx.DiGraph()
    for node in nodes:
        g.add_node(node.id, **_flat(node))
    for edge in edges:
        g.add_edge(
            edge.parent_id, edge.child_id, **{k: v for k, v in _flat(edge).items() if k != "id"}, edge_id=edge.id
        )
    return "\n".join(nx.generate_graphml(g)) + "\n"


def _dot(nodes: list[Node], edges: list[Edge]) -> str:
    lines = ["digraph evodag {", "  rankdir=LR;", "  node [shape=box, style=filled];"]
    for n in nodes:
        color = STATUS_COLORS.get(n.status, "white")
        lines.append(f'  n{n.id} [label="{_label(n)}\\n{n.commit[:10]}", fillcolor="{color}"];')
    lines += [f'  n{e.parent_id} -> n{e.child_id} [label="{e.kind}"];' for e in edges]
    return "\n".join([*lines, "}"]) + "\n"


def _mermaid(nodes: list[Node], edges: list[Edge]) -> str:
    lines = ["graph TD"]
    lines += [f'  n{n.id}["{_label(n)}"]' for n in nodes]
    lines += [f"  n{e.parent_id} -->|{e.kind}| n{e.child_id}" for e in edges]
    lines += [f"  classDef {s} fill:{c}" for s, c in STATUS_COLORS.items()]
    lines += [f"  class n{n.id} {n.status}" for n in nodes if n.status in STATUS_COLORS]
    return "\n".join(lines) + "\n"


def export(store: EvoDAG, fmt: str, run_id: int | None = None) -> tuple[str, int, int]:
    """The DAG of `run_id` (latest run when None) as text in `fmt`; returns (text, node count, edge count)."""
    if fmt not in FORMATS:
        raise InvalidValueError(f"unknown export format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    rid = store._run_or_latest(run_id)
    nodes, edges = store.nodes(run_id=rid), store.edges(run_id=rid)
    if fmt == "json":
        text = _json(nodes, edges, rid)
    elif fmt == "graphml":
        text = _graphml(nodes, edges)
    elif fmt == "dot":
        text = _dot(nodes, edges)
    else:
        text = _mermaid(nodes, edges)
    return text, len(nodes), len(edges)

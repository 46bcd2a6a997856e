"""networkx views of the EvoDAG, built on demand from the store (never cached, never written back).

`graph()` gives the whole DAG as an `nx.DiGraph` (node attrs = Node fields, edge attrs = Edge fields);
the other views answer the common questions. Lineage and best node go straight to indexed SQL
(`evodag.queries`) because they are on the CLI's hot path; the rest walk the graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evodag import queries
from evodag.codec import as_dict
from evodag.models import Node

if TYPE_CHECKING:
    import networkx as nx

    from evodag.store import EvoDAG

CLOSED_STATUSES = ("invalid", "rejected")


def graph(store: EvoDAG, run_id: int | None = None) -> nx.DiGraph:
    """The DAG of `run_id` (every run when None): node id -> Node fields, (parent, child) -> Edge fields."""
    import networkx as nx

    g = nx.DiGraph()
    for node in store.nodes(run_id=run_id):
        g.add_node(node.id, **as_dict(node))
    for edge in store.edges(run_id=run_id):
        g.add_edge(edge.parent_id, edge.child_id, **as_dict(edge))
    return g


def _node(g: nx.DiGraph, node_id: int) -> Node:
    return Node(**g.nodes[node_id])


def lineage(store: EvoDAG, node_id: int) -> list[Node]:
    """Root .. `node_id` (raises UnknownNodeError)."""
    return queries.lineage(store, node_id)


def descendants(store: EvoDAG, node_id: int) -> list[Node]:
    """Every node reachable from `node_id` (excluding it), ordered by id (raises UnknownNodeError)."""
    import networkx as nx

    run_id = store.get_node(node_id).run_id
    g = graph(store, run_id)
    return [_node(g, n) for n in sorted(nx.descendants(g, node_id))]


def branches(store: EvoDAG, run_id: int | None = None) -> list[list[int]]:
    """Every root-to-leaf path as node ids, ordered by leaf id (a node reachable two ways gives two paths)."""
    import networkx as nx

    g = graph(store, run_id)
    roots = sorted(n for n in g.nodes if g.in_degree(n) == 0)
    leaves = sorted(n for n in g.nodes if g.out_degree(n) == 0)
    paths: list[list[int]] = []
    for leaf in leaves:
        for root in roots:
            paths.extend(sorted(nx.all_simple_paths(g, root, leaf)) if root != leaf else [[root]])
    return paths


def best_node(store: EvoDAG, run_id: int | None = None) -> Node | None:
    """The run's recorded best node (see `evodag.queries.best_node`), or None."""
    return queries.best_node(store, run_id)


def best_path(store: EvoDAG, run_id: int | None = None) -> list[Node]:
    """The lineage of the best node (empty when there is none)."""
    best = best_node(store, run_id)
    return [] if best is None else lineage(store, best.id)


def frontier(store: EvoDAG, run_id: int | None = None) -> list[Node]:
    """Leaves (no outgoing edge) whose status is not invalid or rejected, ordered by id."""
    g = graph(store, run_id)
    return [
        _node(g, n) for n in sorted(g.nodes) if g.out_degree(n) == 0 and g.nodes[n]["status"] not in CLOSED_STATUSES
    ]

"""Cherry-pick and revert as real commits: every listed edge, in order, one commit (and node, and edge) each.

The git work happens first, on a chain of commits from the base; only when every edge applied are the nodes
and edges written, in one transaction, so a conflict leaves no half-made nodes and names the edge that failed.
Commits have logical dates, so a resumed run re-makes the same shas and finds the nodes it already stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from evodag.models import Node
from evodag.store import EvoDAG
from saddler.harness.space import HarnessSpace
from saddler.sessions.schema import EvolutionResult


@dataclass
class EvolvedNode:
    """The nodes made by cherry-pick or revert (one per edge, the last is the result), or why none were made."""

    nodes: list[Node]
    key: str
    error: str = ""
    failed_edge: int | None = None

    @property
    def node(self) -> Node | None:
        return self.nodes[-1] if self.nodes else None


def action_key(result: EvolutionResult) -> str:
    """`cherry_pick:12,15@7`: the action, its edges and its base (what `tried_actions` lists)."""
    edges = ",".join(str(e) for e in result.edge_ids)
    return f"{result.action}:{edges}@{result.parent_node_id}" if edges else f"{result.action}@{result.parent_node_id}"


def apply_action(
    store: EvoDAG, space: HarnessSpace, run_id: int, iteration: int, phase: str, result: EvolutionResult
) -> EvolvedNode | None:
    """Carry out cherry_pick / revert of `result.edge_ids` (checked to exist) onto `result.parent_node_id`;
    None for continue / rebase."""
    if result.action not in ("cherry_pick", "revert") or not result.edge_ids:
        return None
    key = action_key(result)
    base = store.get_node(result.parent_node_id)
    op = space.cherry_pick if result.action == "cherry_pick" else space.revert
    verb = "cherry-pick" if result.action == "cherry_pick" else "revert"
    steps: list[tuple[int, Node, str]] = []  # (edge id, source child, commit)
    onto = base.commit
    for i, edge_id in enumerate(result.edge_ids, 1):
        edge = store.get_edge(edge_id)
        src_parent, src_child = store.get_node(edge.parent_id), store.get_node(edge.child_id)
        message = f"saddler: {verb} n{src_child.id} onto n{base.id}" + (
            f" ({i}/{len(result.edge_ids)})" if len(result.edge_ids) > 1 else ""
        )
        git = op(onto, src_parent.commit, src_child.commit, message)
        if not git.ok or not git.commit:
            done = f" after applying edge(s) {', '.join(str(s[0]) for s in steps)}" if steps else ""
            why = git.error or "git produced no commit"
            return EvolvedNode([], key, f"edge {edge_id} failed{done}: {why}", failed_edge=edge_id)
        steps.append((edge_id, src_child, git.commit))
        onto = git.commit
    return EvolvedNode(_store_steps(store, space, run_id, iteration, phase, result, base, steps), key)


def _store_steps(
    store: EvoDAG,
    space: HarnessSpace,
    run_id: int,
    iteration: int,
    phase: str,
    result: EvolutionResult,
    base: Node,
    steps: list[tuple[int, Node, str]],
) -> list[Node]:
    made: list[Node] = []
    parent = base
    baseline = space.baseline_commit()
    with store.transaction():
        for edge_id, src_child, commit in steps:
            node = store.node_by_commit(commit, run_id=run_id)
            if node is None:
                origin = src_child.origin if result.action == "cherry_pick" else f"revert:{src_child.origin}"
                added, removed = space.numstat(baseline, commit)
                node = store.add_node(
                    run_id,
                    commit,
                    parent.id,
                    iteration,
                    phase,
                    result.action,
                    origin,
                    status="pending",
                    hypothesis={"evolution": result.rationale, "edge_ids": list(result.edge_ids)},
                    lines_changed=added + removed,
                )
                a, r = space.numstat(parent.commit, commit)
                files = space.changed_files(parent.commit, commit)
                diff = space.diff(parent.commit, commit)
                store.add_edge(run_id, parent.id, node.id, result.action, diff, files, a, r, source_edge_id=edge_id)
            made.append(node)
            parent = node
    return made

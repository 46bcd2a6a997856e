"""Evolution plumbing: build the request from the EvoDAG and carry out the chosen action in git.

The decision itself belongs to the backend (offline rules or an LLM session); this module only
gathers the DAG view it decides from and turns cherry-pick / revert into real commits and nodes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from evodag.models import Node
from evodag.store import EvoDAG
from saddler.harness.space import HarnessSpace
from saddler.run.outcomes import failing_tasks
from saddler.sessions.schema import EdgeInfo, EvolutionRequest, EvolutionResult, NodeInfo


def lineage_origins(store: EvoDAG, node_id: int) -> list[str]:
    """Origins (e.g. `bank:<id>`) of every node from the root to `node_id`."""
    return [n.origin for n in store.lineage(node_id)]


def tried_actions(store: EvoDAG, run_id: int, before_iteration: int) -> list[str]:
    """Evolution actions of earlier iterations (a resumed iteration must not see its own attempt)."""
    return [
        e.payload.get("key", "")
        for e in store.events(run_id=run_id)
        if e.kind == "evolution.action" and e.payload.get("iteration", 0) < before_iteration
    ]


def build_request(
    store: EvoDAG, run_id: int, iteration: int, current: Node, best: Node, run_dir: str, db_path: str
) -> EvolutionRequest:
    nodes = store.nodes(run_id=run_id)
    by_id = {n.id: n for n in nodes}
    true_fixes: dict[int, list[str]] = defaultdict(list)
    true_regs: dict[int, list[str]] = defaultdict(list)
    for lesson in store.lessons(run_id=run_id):
        if lesson.edge_id is not None and lesson.task_id:
            if lesson.attribution == "true_fix":
                true_fixes[lesson.edge_id].append(lesson.task_id)
            elif lesson.attribution == "true_regression":
                true_regs[lesson.edge_id].append(lesson.task_id)
    edges = [
        EdgeInfo(
            edge_id=e.id,
            parent_id=e.parent_id,
            child_id=e.child_id,
            kind=e.kind,
            origin=by_id[e.child_id].origin,
            child_status=by_id[e.child_id].status,
            files=e.files_changed,
            fixed=e.fixed,
            regressed=e.regressed,
            true_fixes=sorted(true_fixes[e.id]),
            true_regressions=sorted(true_regs[e.id]),
        )
        for e in store.edges(run_id=run_id)
    ]
    lineage_edges: dict[int, list[int]] = {}
    failing: dict[int, list[str]] = {}
    for node in {current.id: current, best.id: best}.values():
        ids = [n.id for n in store.lineage(node.id)[1:]]
        lineage_edges[node.id] = [e.id for e in (store.edge_into(i) for i in ids) if e is not None]
        failing[node.id] = failing_tasks(store.rollouts(node_id=node.id, split="train"))
    return EvolutionRequest(
        run_dir=run_dir,
        db_path=db_path,
        iteration=iteration,
        current_node_id=current.id,
        best_node_id=best.id,
        nodes=[
            NodeInfo(
                node_id=n.id,
                parent_id=n.parent_id,
                status=n.status,
                origin=n.origin,
                dev_mean=n.dev_mean,
                batch_after=n.batch_after,
                lines_changed=n.lines_changed,
                iteration=n.iteration,
            )
            for n in nodes
        ],
        edges=edges,
        lineage_edge_ids=lineage_edges,
        failing_train_tasks=failing,
        tried_actions=tried_actions(store, run_id, iteration),
    )


@dataclass
class EvolvedNode:
    """A node made by cherry-pick or revert, or the reason none could be made."""

    node: Node | None
    key: str
    error: str = ""


def apply_action(
    store: EvoDAG, space: HarnessSpace, run_id: int, iteration: int, phase: str, result: EvolutionResult
) -> EvolvedNode | None:
    """Carry out cherry_pick / revert as a commit + node + edge; None for continue / rebase."""
    if result.action not in ("cherry_pick", "revert") or not result.edge_ids:
        return None
    base = store.get_node(result.parent_node_id)
    edge = store.get_edge(result.edge_ids[0])
    key = f"{result.action}:{edge.id}@{base.id}"
    src_parent, src_child = store.get_node(edge.parent_id), store.get_node(edge.child_id)
    op = space.cherry_pick if result.action == "cherry_pick" else space.revert
    verb = "cherry-pick" if result.action == "cherry_pick" else "revert"
    git = op(base.commit, src_parent.commit, src_child.commit, f"saddler: {verb} n{src_child.id} onto n{base.id}")
    if not git.ok or not git.commit:
        return EvolvedNode(None, key, git.error or "git produced no commit")
    existing = store.node_by_commit(git.commit, run_id=run_id)
    if existing is not None:
        return EvolvedNode(existing, key)
    origin = src_child.origin if result.action == "cherry_pick" else f"revert:{src_child.origin}"
    added, removed = space.numstat(space.baseline_commit(), git.commit)
    with store.transaction():
        node = store.add_node(
            run_id,
            git.commit,
            base.id,
            iteration,
            phase,
            result.action,
            origin,
            status="pending",
            hypothesis={"evolution": result.rationale},
            lines_changed=added + removed,
        )
        files = space.changed_files(base.commit, git.commit)
        a, r = space.numstat(base.commit, git.commit)
        store.add_edge(
            run_id,
            base.id,
            node.id,
            result.action,
            space.diff(base.commit, git.commit),
            files,
            a,
            r,
            source_edge_id=edge.id,
        )
    return EvolvedNode(node, key)

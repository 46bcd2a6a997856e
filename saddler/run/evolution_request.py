"""Evolution's view of the DAG and the check of its answer.

The decision itself belongs to the backend (offline rules or an LLM session); this module gathers the DAG view
it decides from (`build_request`, with the nodes it may start from) and checks the answer against the store
(`answer_error`): an answer is a claim, and one naming a node or edge that does not exist, a base it may not
start from, or edges that cannot be applied there is refused with a reason the retry prompt states.
`saddler.run.transplant` carries out cherry-pick / revert; `saddler.run.evolution_step` is the loop's step.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from evodag.decisions import KEPT_STATUSES
from evodag.models import Node
from evodag.store import EvoDAG
from saddler.run.outcomes import failing_tasks
from saddler.sessions.schema import EdgeInfo, EvolutionRequest, EvolutionResult, NodeInfo


def lineage_origins(store: EvoDAG, node_id: int) -> list[str]:
    """Origins (e.g. `bank:<id>`) of every node from the root to `node_id`."""
    return [n.origin for n in store.lineage(node_id)]


def tried_actions(store: EvoDAG, run_id: int, before_iteration: int) -> list[str]:
    """Evolution actions of earlier iterations (a resumed iteration must not see its own attempt)."""
    return [
        e.payload.get("key", "")
        for e in store.events(run_id=run_id, kind="evolution.action")
        if e.payload.get("iteration", 0) < before_iteration
    ]


def lineage_edge_ids(store: EvoDAG, node_id: int) -> list[int]:
    """Ids of the edges from the root down to `node_id`, root first."""
    ids = [n.id for n in store.lineage(node_id)[1:]]
    return [e.id for e in (store.edge_into(i) for i in ids) if e is not None]


def allowed_bases(nodes: list[Node], bases: str) -> list[int]:
    """Ids of the nodes evolution may start from: kept ones (`policies.evolution_bases = "kept"`), or every node
    that is neither invalid nor still pending (`"any"`)."""
    if bases == "any":
        return [n.id for n in nodes if n.status not in ("invalid", "pending")]
    return [n.id for n in nodes if n.status in KEPT_STATUSES]


def build_request(
    store: EvoDAG,
    run_id: int,
    iteration: int,
    current: Node,
    best: Node,
    where: dict[str, Any],
    bases: str = "kept",
) -> EvolutionRequest:
    """Evolution's request for `iteration`: the DAG view and the nodes it may start from; `where` is the session's
    run folder, view and readable paths (`RunContext.session_paths`)."""
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
        lineage_edges[node.id] = lineage_edge_ids(store, node.id)
        failing[node.id] = failing_tasks(store.rollouts(node_id=node.id, split="train"))
    return EvolutionRequest(
        **where,
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
        allowed_base_ids=allowed_bases(nodes, bases),
    )


def answer_error(store: EvoDAG, request: EvolutionRequest, result: EvolutionResult) -> str:
    """Why the answer cannot be carried out ('' when it can): the base must be a node of this run that evolution
    may start from; cherry-pick / revert need edges of this run, each listed once; a revert undoes edges on the
    base's lineage, a cherry-pick brings edges that are not on it yet."""
    nodes = {n.node_id: n for n in request.nodes}
    base = nodes.get(result.parent_node_id)
    if base is None:
        return f"node {result.parent_node_id} does not exist in this run (its nodes are listed in the prompt)"
    if result.parent_node_id not in request.allowed_base_ids:
        allowed = ", ".join(str(i) for i in request.allowed_base_ids)
        return f"node {base.node_id} is {base.status}: evolution may start from nodes {allowed} only"
    if result.action not in ("cherry_pick", "revert"):
        return ""
    if not result.edge_ids:
        return f"a {result.action} needs edge_ids: the edges to apply, in order"
    lineage = set(lineage_edge_ids(store, base.node_id))
    seen: set[int] = set()
    for edge_id in result.edge_ids:
        edge = next((e for e in request.edges if e.edge_id == edge_id), None)
        if edge is None:
            return f"edge {edge_id} does not exist in this run (its edges are listed in the prompt)"
        if edge_id in seen:
            return f"edge {edge_id} is listed twice"
        seen.add(edge_id)
        if result.action == "revert" and edge_id not in lineage:
            return f"edge {edge_id} is not on node {base.node_id}'s lineage: a revert undoes a change the base holds"
        if result.action == "cherry_pick" and edge_id in lineage:
            return f"edge {edge_id} is already on node {base.node_id}'s lineage: there is nothing to cherry-pick"
    return ""

"""Read queries for people and sessions: summary, scenario, lineage, best node, batch status, diff paths.

Each returns plain JSON-ready dicts/lists (or records) and uses indexed SQL only, so they stay in the
tens of milliseconds on 10k-node / 200k-rollout stores. `evodag` never decides; these only report.
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any

from evodag import codec
from evodag.errors import UnknownTaskError
from evodag.history import failure_signature, metric_keys, task_registry
from evodag.models import Edge, Iteration, Lesson, Node

if TYPE_CHECKING:
    from evodag.store import EvoDAG

RECENT_DECISIONS = 10
NODE_BRIEF = ("id", "commit", "parent_id", "iteration", "status", "dev_mean", "dev_std", "test_mean", "test_std",
              "lines_changed")  # fmt: skip


def brief(node: Node | None) -> dict[str, Any] | None:
    """The fields of a node a summary shows."""
    return None if node is None else {k: getattr(node, k) for k in NODE_BRIEF}


def best_node(store: EvoDAG, run_id: int | None = None) -> Node | None:
    """The run's best node as the optimizer recorded it (`runs.best_node_id`, set by its ranking policy whenever
    its choice changes); None while none is recorded. evodag never ranks: there is one rule, the run's."""
    run = store.get_run(store._run_or_latest(run_id))
    return None if run.best_node_id is None else store.get_node(run.best_node_id)


def lineage(store: EvoDAG, node_id: int) -> list[Node]:
    """Root .. `node_id` following `parent_id` (raises UnknownNodeError)."""
    store.get_node(node_id)
    sql = f"""WITH RECURSIVE up(id, depth) AS (SELECT ?, 0 UNION ALL
              SELECT n.parent_id, up.depth + 1 FROM nodes n JOIN up ON n.id = up.id WHERE n.parent_id IS NOT NULL)
              SELECT {codec.select_list(Node, "n")} FROM up JOIN nodes n ON n.id = up.id ORDER BY up.depth DESC"""
    decode = codec.decoder(Node)
    return [decode(r) for r in store.conn.execute(sql, (node_id,))]


def descendants(store: EvoDAG, node_id: int) -> list[Node]:
    """Every node reachable from `node_id` through edges (excluding itself), ordered by id."""
    store.get_node(node_id)
    sql = f"""WITH RECURSIVE down(id) AS (SELECT child_id FROM edges WHERE parent_id = ? UNION
              SELECT e.child_id FROM edges e JOIN down ON e.parent_id = down.id)
              SELECT {codec.select_list(Node, "n")} FROM down JOIN nodes n ON n.id = down.id ORDER BY n.id"""
    decode = codec.decoder(Node)
    return [decode(r) for r in store.conn.execute(sql, (node_id,))]


def lineage_train_outcomes(store: EvoDAG, node_id: int) -> dict[str, dict[str, Any]]:
    """What the run believes `node_id` does on each train task it or an ancestor was evaluated on: the train
    rollouts of the nearest node of root..`node_id` that has any for the task.

    `{task: {"node_id", "runs", "passes", "signature"}}`; `signature` (`evodag.history.failure_signature`)
    is the first failing rollout's, or None when every rollout passed.
    """
    store.get_node(node_id)
    sql = """WITH RECURSIVE up(id, depth) AS (SELECT ?, 0 UNION ALL
             SELECT n.parent_id, up.depth + 1 FROM nodes n JOIN up ON n.id = up.id WHERE n.parent_id IS NOT NULL)
             SELECT up.depth, r.node_id, r.task_id, r.passed, r.rationale, r.failure_file, r.disposition
             FROM up JOIN rollouts r ON r.node_id = up.id AND r.split = 'train'
             ORDER BY up.depth, r.task_id, r.repetition, r.id"""
    out: dict[str, dict[str, Any]] = {}
    depth_of: dict[str, int] = {}
    for depth, nid, task, passed, rationale, ffile, disposition in store.conn.execute(sql, (node_id,)):
        if depth_of.setdefault(task, depth) != depth:
            continue  # a nearer node already has this task
        entry = out.setdefault(task, {"node_id": nid, "runs": 0, "passes": 0, "signature": None})
        entry["runs"] += 1
        entry["passes"] += bool(passed)
        if not passed and entry["signature"] is None:
            entry["signature"] = failure_signature(rationale, ffile, disposition)
    return out


def _run_block(store: EvoDAG, rid: int) -> dict[str, Any]:
    run = store.get_run(rid)
    data = codec.as_dict(run)
    data.pop("config")
    data.pop("inputs")
    return data


def summary(store: EvoDAG, run_id: int | None = None) -> dict[str, Any]:
    """Run info, node counts by status, rollout/session counts and cost, baseline, best, current iteration,
    recent decisions."""
    rid = store._run_or_latest(run_id)
    run = _run_block(store, rid)
    by_status = dict(store.conn.execute("SELECT status, count(*) FROM nodes WHERE run_id = ? GROUP BY status", (rid,)))
    baseline = store.get_node(run["baseline_node_id"]) if run["baseline_node_id"] is not None else None
    if baseline is None:
        baseline = store._one(Node, "run_id = ? AND parent_id IS NULL ORDER BY id", (rid,))
    current = store.current_iteration(rid)
    decode = codec.decoder(Iteration)
    recent = [
        decode(r)
        for r in store.conn.execute(
            f"SELECT {codec.select_list(Iteration)} FROM iterations WHERE run_id = ? AND decision IS NOT NULL "
            "ORDER BY number DESC, id DESC LIMIT ?",
            (rid, RECENT_DECISIONS),
        )
    ]
    return {
        "run": run,
        **metric_keys(store, rid),
        "nodes": {"total": sum(by_status.values()), "by_status": dict(sorted(by_status.items()))},
        "rollouts": {
            "count": store.count_rollouts(rid),
            "cost": round(store.rollout_cost(rid), 6),
            "infra_errors": store.disposition_counts(rid).get("infra_error", 0),
        },
        "sessions": {"count": store.count_sessions(rid), "cost": round(store.session_cost(rid), 6)},
        "baseline": brief(baseline),
        "best": brief(best_node(store, rid)),
        "iteration": None if current is None else codec.as_dict(current),
        "recent_decisions": [
            {"number": it.number, "decision": it.decision, "parent_id": it.parent_id, "candidate_id": it.candidate_id}
            for it in recent
        ],
    }


def lesson_dict(lesson: Lesson) -> dict[str, Any]:
    """A lesson without its run id (the context already names the run)."""
    data = codec.as_dict(lesson)
    data.pop("run_id")
    return data


def scenario(store: EvoDAG, task_id: str, run_id: int | None = None) -> dict[str, Any]:
    """One task across the DAG: per-node outcomes, lessons on it, and its registry (`evodag.history.task_registry`:
    root causes, failure signatures, every attempt with outcome and reason, the files it is sensitive to)."""
    rid = store._run_or_latest(run_id)
    rows = store.conn.execute(
        """SELECT r.node_id, n."commit", n.status, n.iteration, r.split, r.repetition, r.seed, r.score, r.passed,
                  r.disposition, r.rationale, r.failure_file, r.task_group
           FROM rollouts r JOIN nodes n ON n.id = r.node_id
           WHERE r.task_id = ? AND r.run_id = ? ORDER BY r.node_id, r.split, r.repetition, r.id""",
        (task_id, rid),
    ).fetchall()
    lessons = store.lessons(run_id=rid, task_id=task_id)
    if not rows and not lessons:
        raise UnknownTaskError(task_id)
    nodes: dict[int, dict[str, Any]] = {}
    group = ""
    for nid, commit, status, iteration, split, rep, seed, score, passed, disp, rationale, ffile, tgroup in rows:
        group = group or tgroup
        entry = nodes.get(nid)
        if entry is None:
            entry = nodes[nid] = {"node_id": nid, "commit": commit, "status": status, "iteration": iteration,
                                  "outcomes": [], "passes": 0, "runs": 0}  # fmt: skip
        entry["outcomes"].append({
            "split": split, "repetition": rep, "seed": seed, "score": score, "passed": bool(passed),
            "disposition": disp, "rationale": rationale, "failure_file": ffile,
        })  # fmt: skip
        entry["passes"] += bool(passed)
        entry["runs"] += 1
    return {
        "task_id": task_id,
        "task_group": group,
        "run_id": rid,
        "nodes": list(nodes.values()),
        "lessons": [lesson_dict(les) for les in lessons],
        **task_registry(store, task_id, rid, lessons),
    }


def task_status(store: EvoDAG, node_id: int | None, tasks: list[str], split: str = "train") -> dict[str, Any]:
    """Per task: runs, passes, mean score and status (pass|fail|mixed|pending) of `node_id` on `split`."""
    out: dict[str, Any] = {t: {"runs": 0, "passes": 0, "mean_score": None, "status": "pending"} for t in tasks}
    if node_id is None or not tasks:
        return out
    marks = ", ".join("?" for _ in tasks)
    sql = (f"SELECT task_id, count(*), sum(passed), avg(score) FROM rollouts WHERE node_id = ? AND split = ? "
           f"AND task_id IN ({marks}) GROUP BY task_id")  # fmt: skip
    for task, runs, passes, mean in store.conn.execute(sql, (node_id, split, *tasks)):
        status = "pass" if passes == runs else "fail" if passes == 0 else "mixed"
        out[task] = {"runs": runs, "passes": passes, "mean_score": round(mean, 6), "status": status}
    return out


def batch(store: EvoDAG, run_id: int | None = None) -> dict[str, Any]:
    """The current iteration's mini-batch with each task's status on the parent and the candidate."""
    rid = store._run_or_latest(run_id)
    current = store.current_iteration(rid)
    if current is None:
        return {"run_id": rid, "iteration": None, "tasks": []}
    parent = task_status(store, current.parent_id, current.batch)
    candidate = task_status(store, current.candidate_id, current.batch)
    return {
        "run_id": rid,
        "iteration": {k: v for k, v in codec.as_dict(current).items() if k != "batch"},
        "tasks": [{"task_id": t, "parent": parent[t], "candidate": candidate[t]} for t in current.batch],
    }


def edge_step(store: EvoDAG, edge: Edge) -> dict[str, Any]:
    """An edge as one step of a path: ends, kind, stats and diff text."""
    return {
        "edge_id": edge.id, "parent_id": edge.parent_id, "child_id": edge.child_id, "kind": edge.kind,
        "files_changed": edge.files_changed, "lines_added": edge.lines_added, "lines_removed": edge.lines_removed,
        "diff": store.get_blob(edge.diff_sha),
    }  # fmt: skip


def _path_steps(store: EvoDAG, chain: list[Node]) -> list[dict[str, Any]]:
    return [edge_step(store, store.edge_between(a.id, b.id)) for a, b in pairwise(chain)]


def diff_path(store: EvoDAG, a: int, b: int) -> dict[str, Any]:
    """Diffs from `a` to `b`: one segment if `a` is an ancestor of `b` (or equal), else the two lineages'
    segments from their deepest common ancestor (from the roots when there is none)."""
    line_a, line_b = lineage(store, a), lineage(store, b)
    ids_b = [n.id for n in line_b]
    if a in ids_b:
        chain = line_b[ids_b.index(a) :]
        segment = {"label": f"{a}..{b}", "from": a, "to": b, "steps": _path_steps(store, chain)}
        return {"a": a, "b": b, "relation": "ancestor", "common_ancestor": a, "segments": [segment]}
    common = None
    for x, y in zip(line_a, line_b, strict=False):
        if x.id != y.id:
            break
        common = x.id
    start = 0 if common is None else [n.id for n in line_a].index(common)
    seg_a, seg_b = line_a[start:], line_b[start:]
    segments = [
        {"label": f"{'root' if common is None else common}..{end}", "from": common, "to": end,
         "steps": _path_steps(store, seg)}
        for seg, end in ((seg_a, a), (seg_b, b))
    ]  # fmt: skip
    return {"a": a, "b": b, "relation": "diverged", "common_ancestor": common, "segments": segments}


def split_rollup(store: EvoDAG, node_id: int) -> dict[str, dict[str, Any]]:
    """Per split: how many rollouts `node_id` has, how many passed, and their mean score."""
    sql = (
        "SELECT split, count(*), sum(passed), avg(score) FROM rollouts WHERE node_id = ? GROUP BY split ORDER BY split"
    )
    return {
        split: {"runs": runs, "passes": passes, "mean_score": round(mean, 6)}
        for split, runs, passes, mean in store.conn.execute(sql, (node_id,))
    }


def edge_dict(edge: Edge | None) -> dict[str, Any] | None:
    """An edge's fields (its diff stays in the blobs table)."""
    return None if edge is None else codec.as_dict(edge)


def node_detail(store: EvoDAG, node_id: int) -> dict[str, Any]:
    """A node with its incoming edge, children, rollout roll-up per split and lessons."""
    node = store.get_node(node_id)
    return {
        **metric_keys(store, node.run_id),
        "node": codec.as_dict(node),
        "edge_in": edge_dict(store.edge_into(node_id)),
        "children": [child.id for child in store.children(node_id)],
        "rollouts": split_rollup(store, node_id),
        "lessons": [lesson_dict(les) for les in store.lessons(node_id=node_id)],
    }


def edge_detail(store: EvoDAG, parent_id: int, child_id: int) -> dict[str, Any]:
    """The edge parent→child with its diff text, per-task transitions and lessons on it."""
    return _edge_doc(store, store.edge_between(parent_id, child_id))


def edge_by_id(store: EvoDAG, edge_id: int) -> dict[str, Any]:
    """`edge_detail` of the edge `edge_id` (raises UnknownEdgeError)."""
    return _edge_doc(store, store.get_edge(edge_id))


def _edge_doc(store: EvoDAG, edge: Edge) -> dict[str, Any]:
    return {
        "edge": codec.as_dict(edge),
        "diff": store.get_blob(edge.diff_sha),
        "lessons": [lesson_dict(les) for les in store.lessons(edge_id=edge.id)],
    }


def lineage_doc(store: EvoDAG, node_id: int) -> dict[str, Any]:
    """Root .. node, each with the kind of the edge that produced it."""
    chain = lineage(store, node_id)
    steps = []
    for node in chain:
        edge = store.edge_into(node.id)
        steps.append({**(brief(node) or {}), "edge_kind": None if edge is None else edge.kind, "origin": node.origin})
    return {"node_id": node_id, "lineage": steps}


def iterations_after(store: EvoDAG, run_id: int, after_id: int) -> list[Iteration]:
    """The run's iterations with an id above `after_id`, and every unfinished one, by id: what a reader that keeps
    the finished iterations it has already read (nothing changes an iteration once it is finished) reads again."""
    decode = codec.decoder(Iteration)
    return [
        decode(r)
        for r in store.conn.execute(
            f"SELECT {codec.select_list(Iteration)} FROM iterations "
            "WHERE run_id = ? AND (id > ? OR finished_at IS NULL) ORDER BY id",
            (run_id, after_id),
        )
    ]

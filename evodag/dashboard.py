"""The views of the run dashboard (`saddler ui`, report.html) and of `evo-dag graph|progress|page`: JSON-ready.

One query layer: the page shows exactly these documents (and `evodag.queries` / `evodag.history` ones), through
`sealed`, the rule every view of a run follows for held-out data: test figures appear only once the run has
finished (`held_out_visible`). Per-task dev outcomes are for people; sessions never read this module (they query
the session view, `evodag.view`).
"""

from __future__ import annotations

import bisect
import json
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from evodag import codec, queries
from evodag.errors import UnknownNodeError, UnknownTaskError
from evodag.history import decision_evidence, metric_keys

if TYPE_CHECKING:
    from evodag.store import EvoDAG

HELD_OUT_FIELDS = ("test_mean", "test_std")
"""Node fields holding test results (also `evodag.view.HELD_OUT_NODE_FIELDS`)."""
HELD_OUT_SPLIT = "test"
GRAPH_NODE_FIELDS = ("id", "parent_id", "iteration", "phase", "patch_kind", "origin", "status", "status_reason",
                     "dev_mean", "dev_std", "test_mean", "test_std", "lines_changed")  # fmt: skip


def held_out_visible(store: EvoDAG, run_id: int) -> bool:
    """Whether a person's view of the run may show test results: only once the run has finished."""
    return store.get_run(run_id).status == "finished"


def sealed(doc: Any, visible: bool) -> Any:
    """`doc` as a view of a run may show it: unchanged when `visible`, else with test fields set to None, the
    `test` key of split-keyed dicts dropped and list items of the test split (`{"split": "test", ...}`) left out."""
    if visible:
        return doc
    if isinstance(doc, dict):
        return {k: None if k in HELD_OUT_FIELDS else sealed(v, visible) for k, v in doc.items() if k != HELD_OUT_SPLIT}
    if isinstance(doc, list):
        return [sealed(v, visible) for v in doc if not (isinstance(v, dict) and v.get("split") == HELD_OUT_SPLIT)]
    return doc


def head(store: EvoDAG, run_id: int | None = None) -> dict[str, Any]:
    """The cheap poll of a live page: the run's newest event id and its status (one indexed row each)."""
    rid = store._run_or_latest(run_id)
    row = store.conn.execute("SELECT max(id) FROM events WHERE run_id = ?", (rid,)).fetchone()
    return {"run_id": rid, "last_event_id": int(row[0] or 0), "status": store.get_run(rid).status}


def _hypothesis_title(raw: str | None) -> str:
    hyp = json.loads(raw) if raw else None
    if not isinstance(hyp, dict):
        return ""
    for key in ("title", "claim", "plan", "summary"):
        if hyp.get(key):
            return str(hyp[key])[:160]
    return ""


def _close_calls(store: EvoDAG, rid: int) -> dict[int, int]:
    """Per candidate: how many rounds of close-call evidence its acceptance gathered (`evodag.history`), when any."""
    out = {}
    for cand, stored in store.conn.execute(
        "SELECT candidate_id, evidence FROM iterations WHERE run_id = ? AND candidate_id IS NOT NULL "
        "AND evidence IS NOT NULL",
        (rid,),
    ):
        rounds = len((decision_evidence(stored) or {}).get("rounds", []))
        if rounds:
            out[cand] = rounds
    return out


def graph(store: EvoDAG, run_id: int | None = None) -> dict[str, Any]:
    """The DAG as a graph: nodes (status, phase, scores, a one-line hypothesis), edges (kind, lines, the rounds of
    close-call evidence its acceptance gathered), the baseline, the recorded best and the best's lineage."""
    rid = store._run_or_latest(run_id)
    run = store.get_run(rid)
    cols = ", ".join(f'"{c}"' for c in (*GRAPH_NODE_FIELDS, "hypothesis"))
    nodes = []
    for row in store.conn.execute(f"SELECT {cols} FROM nodes WHERE run_id = ? ORDER BY id", (rid,)):
        node = dict(zip(GRAPH_NODE_FIELDS, row[:-1], strict=True))
        node["title"] = _hypothesis_title(row[-1])
        nodes.append(node)
    edges = [
        dict(zip(("id", "parent_id", "child_id", "kind", "lines_added", "lines_removed", "source_edge_id"), r,
                 strict=True))
        for r in store.conn.execute(
            "SELECT id, parent_id, child_id, kind, lines_added, lines_removed, source_edge_id FROM edges "
            "WHERE run_id = ? ORDER BY id", (rid,))
    ]  # fmt: skip
    close_calls = _close_calls(store, rid)
    for edge in edges:
        edge["close_call_rounds"] = close_calls.get(edge["child_id"], 0)
    best = run.best_node_id
    doc = {
        "run_id": rid, **metric_keys(store, rid), "status": run.status, "baseline_id": run.baseline_node_id,
        "best_id": best, "best_lineage": [] if best is None else [n.id for n in store.lineage(best)],
        "nodes": nodes, "edges": edges,
    }  # fmt: skip
    return sealed(doc, held_out_visible(store, rid))


def _best_over_time(store: EvoDAG, rid: int) -> tuple[list[int], list[int | None]]:
    """(event ids, best node id recorded from that event on), from the run's `run.updated` events."""
    rows = store.conn.execute(
        """SELECT id, json_extract(payload, '$.best_node_id') FROM events WHERE run_id = ? AND kind = 'run.updated'
           AND json_extract(payload, '$.best_node_id') IS NOT NULL ORDER BY id""",
        (rid,),
    ).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]


def progress(store: EvoDAG, run_id: int | None = None) -> dict[str, Any]:
    """Per finished iteration: its decision, the best node the run had recorded when it ended and that node's dev,
    the search rollouts (train + dev) and the cost (rollouts + sessions) spent up to then."""
    rid = store._run_or_latest(run_id)
    finished = dict(store.conn.execute(
        """SELECT json_extract(payload, '$.id'), max(id) FROM events WHERE run_id = ? AND kind = 'iteration.updated'
           AND json_extract(payload, '$.finished_at') IS NOT NULL GROUP BY 1""", (rid,)))  # fmt: skip
    its = store.conn.execute(
        "SELECT id, number, decision, last_rollout, finished_at FROM iterations WHERE run_id = ? "
        "AND finished_at IS NOT NULL ORDER BY number, id",
        (rid,),
    ).fetchall()
    rows = store.conn.execute(
        "SELECT id, cost FROM rollouts WHERE run_id = ? AND split != ? ORDER BY id", (rid, HELD_OUT_SPLIT)
    ).fetchall()
    all_rows = store.conn.execute("SELECT id, cost FROM rollouts WHERE run_id = ? ORDER BY id", (rid,)).fetchall()
    ids = [r[0] for r in rows]
    all_ids, all_cost = [r[0] for r in all_rows], list(accumulate(r[1] for r in all_rows))
    session_cost = dict(store.conn.execute(
        "SELECT iteration, sum(cost_usd) FROM sessions WHERE run_id = ? GROUP BY iteration", (rid,)))  # fmt: skip
    best_events, best_ids = _best_over_time(store, rid)
    dev = dict(store.conn.execute("SELECT id, dev_mean FROM nodes WHERE run_id = ?", (rid,)))
    points = []
    for iid, number, decision, last_rollout, finished_at in its:
        upto = bisect.bisect_right(all_ids, last_rollout or 0)
        at = bisect.bisect_right(best_events, finished.get(iid, 0))
        best = best_ids[at - 1] if at else None
        sessions = sum(c for n, c in session_cost.items() if n is not None and n <= number)
        points.append({
            "iteration": number, "decision": decision, "finished_at": finished_at, "best_id": best,
            "best_dev": dev.get(best), "rollouts": bisect.bisect_right(ids, last_rollout or 0),
            "cost": round((all_cost[upto - 1] if upto else 0.0) + sessions, 6),
        })  # fmt: skip
    return {"run_id": rid, **metric_keys(store, rid), "points": points}


def task_outcomes(store: EvoDAG, node_id: int) -> list[dict[str, Any]]:
    """Per (split, task) of a node's rollouts: runs, passes, mean score and the first failure's rationale."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for split, task, passed, score, rationale in store.conn.execute(
        "SELECT split, task_id, passed, score, rationale FROM rollouts WHERE node_id = ? ORDER BY split, task_id, id",
        (node_id,),
    ):
        entry = out.setdefault((split, task), {"split": split, "task_id": task, "runs": 0, "passes": 0, "score": 0.0,
                                                "failure": None})  # fmt: skip
        entry["runs"] += 1
        entry["passes"] += bool(passed)
        entry["score"] += score
        if not passed and entry["failure"] is None:
            entry["failure"] = rationale
    for entry in out.values():
        entry["score"] = round(entry["score"] / entry["runs"], 6)
    return list(out.values())


def _diff_to_baseline(store: EvoDAG, baseline: int | None, node_id: int) -> dict[str, Any] | None:
    if baseline is None or baseline == node_id:
        return None
    return queries.diff_path(store, baseline, node_id)


def node_page(store: EvoDAG, node_id: int) -> dict[str, Any]:
    """A node's page: `queries.node_detail`, its diff against its parent and the diffs from the baseline to it,
    per-task outcomes per split, and the sessions of its iteration (cost, turns, transcript path)."""
    node = store.get_node(node_id)
    run = store.get_run(node.run_id)
    edge = store.edge_into(node_id)
    sessions = [
        {k: v for k, v in codec.as_dict(s).items() if k not in ("result", "change_sha", "run_id")}
        for s in store.sessions(node.run_id, node.iteration)
    ] if node.parent_id is not None else []  # fmt: skip
    doc = {
        **queries.node_detail(store, node_id),
        "diff": None if edge is None else store.get_blob(edge.diff_sha),
        "baseline_diff": _diff_to_baseline(store, run.baseline_node_id, node_id),
        "tasks": task_outcomes(store, node_id),
        "sessions": sessions,
        "is_best": run.best_node_id == node_id,
    }
    return sealed(doc, held_out_visible(store, node.run_id))


def task_page(store: EvoDAG, task_id: str, run_id: int | None = None) -> dict[str, Any]:
    """`queries.scenario` (outcome on every node, root causes, attempted fixes) under the held-out rule."""
    rid = store._run_or_latest(run_id)
    visible = held_out_visible(store, rid)
    if (
        not visible
        and store.conn.execute(
            "SELECT 1 FROM rollouts WHERE task_id = ? AND run_id = ? AND split != ? LIMIT 1",
            (task_id, rid, HELD_OUT_SPLIT),
        ).fetchone()
        is None
    ):
        raise UnknownTaskError(task_id)  # a test task is unknown until the run has finished
    return sealed(queries.scenario(store, task_id, rid), visible)


def task_index(store: EvoDAG, run_id: int | None = None) -> dict[str, Any]:
    """Every task the run has rollouts of, per split, with its pass counts on the baseline and on the best."""
    rid = store._run_or_latest(run_id)
    run = store.get_run(rid)
    ends = {"baseline": run.baseline_node_id, "best": run.best_node_id}
    tasks: dict[tuple[str, str], dict[str, Any]] = {}
    for split, task, group, node, runs, passes in store.conn.execute(
        """SELECT split, task_id, max(task_group), node_id, count(*), sum(passed) FROM rollouts WHERE run_id = ?
           GROUP BY split, task_id, node_id ORDER BY split, task_id""",
        (rid,),
    ):
        entry = tasks.setdefault((split, task), {"split": split, "task_id": task, "task_group": group, "nodes": 0,
                                                 "baseline": None, "best": None})  # fmt: skip
        entry["nodes"] += 1
        for label, end in ends.items():
            if node == end:
                entry[label] = {"runs": runs, "passes": passes}
    doc = {"run_id": rid, "tasks": list(tasks.values())}
    return sealed(doc, held_out_visible(store, rid))


def run_views(store: EvoDAG, run_id: int | None = None, *, pages: bool = False) -> dict[str, Any]:
    """Every view of a run in one document (what report.html inlines): summary, graph, history, progress, tasks,
    and with `pages` every node's and task's page."""
    from evodag.history import history

    rid = store._run_or_latest(run_id)
    doc: dict[str, Any] = {
        "head": head(store, rid),
        "summary": summary(store, rid),
        "graph": graph(store, rid),
        "history": history(store, rid),
        "progress": progress(store, rid),
        "tasks": task_index(store, rid),
    }
    if pages:
        doc["nodes"] = {str(n["id"]): node_page(store, n["id"]) for n in doc["graph"]["nodes"]}
        names = dict.fromkeys(t["task_id"] for t in doc["tasks"]["tasks"])
        doc["task_pages"] = {t: task_page(store, t, rid) for t in names}
    return doc


def summary(store: EvoDAG, run_id: int | None = None) -> dict[str, Any]:
    """`queries.summary` under the held-out rule."""
    rid = store._run_or_latest(run_id)
    return sealed(queries.summary(store, rid), held_out_visible(store, rid))


def require_node_of_run(store: EvoDAG, node_id: int, run_id: int | None = None) -> None:
    """Raise UnknownNodeError unless `node_id` is a node of run `run_id` (default: the latest)."""
    if store.get_node(node_id).run_id != store._run_or_latest(run_id):
        raise UnknownNodeError(node_id)

"""The run's story for people and sessions: the iterations in order (`history`), and per task what was
tried and what it touched (`task_registry`, the registry part of `evo-dag scenario`).

Both are read-only and JSON-ready. They derive everything from the existing tables (iterations, nodes,
edges, edge_tasks, lessons, rollouts, events): no column exists only for them.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from statistics import mean
from typing import TYPE_CHECKING, Any

from evodag.metric import run_metric
from evodag.models import Lesson

if TYPE_CHECKING:
    from evodag.store import EvoDAG

SATURATED_REASON = "the parent passes every task of the mini-batch: nothing to diagnose"
ATTEMPT_TRANSITIONS = ("fixed", "still_failing", "regressed")  # still_passing is not an attempt on the task
HISTORY_EVENT_KINDS = ("iteration.started", "evolution.action", "diagnosis.no_patch", "phase.moved")
"""The events `history` reads (the session view keeps exactly these: `evodag.view`)."""
_CHECK = re.compile(r"\s*([A-Za-z_][\w.\-]{0,47})\s*:")


def failure_signature(rationale: str, failure_file: str | None, disposition: str) -> str:
    """A failure's pattern key from what a rollout row holds: `<file> :: <check>`.

    `check` is the grader's check name when the rationale starts with one (`event_time: ...`), else the
    disposition (`task_failure`, `timeout`, `infra_error`); `file` is the harness file at the failure point
    or `-`. Rollouts failing the same check at the same place share a signature.
    """
    if disposition in ("infra_error", "timeout"):
        check = disposition
    else:
        found = _CHECK.match(rationale or "")
        check = found.group(1) if found else disposition or "failed"
    return f"{failure_file or '-'} :: {check}"


def evidence_rounds(evidence: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The rounds of an iteration's stored evidence plan that ran (each `{"tasks", "repetition"}`), in order."""
    if not evidence:
        return []
    return [r for r in evidence.get("plan", [])[: evidence.get("rounds_run", 0)] if isinstance(r, dict)]


def compared_tasks(batch: list[str], evidence: dict[str, Any] | None) -> list[str]:
    """Every train task an acceptance decision compared: the batch, then the evidence rounds' tasks, once each."""
    return list(dict.fromkeys([*batch, *(t for r in evidence_rounds(evidence) for t in r["tasks"])]))


def decision_evidence(stored: str | None) -> dict[str, Any] | None:
    """What an acceptance decision rested on, from the iteration's stored `evidence`: the rule, wins, losses and
    confidence over the tasks compared, the extra rounds that ran (their tasks), why it stopped and the rollouts
    the evidence cost; None before a decision."""
    doc = json.loads(stored) if stored else None
    if not isinstance(doc, dict) or "verdict" not in doc:
        return None
    ran = evidence_rounds(doc)
    return {
        "rule": doc.get("rule"), "confidence": doc.get("confidence"), "wins": doc.get("wins"),
        "losses": doc.get("losses"), "tasks": doc.get("tasks"), "rounds": [r["tasks"] for r in ran],
        "rollouts": doc.get("rollouts", 0), "stopped": doc.get("stopped", ""),
    }  # fmt: skip


class _IterationEvents:
    """Per iteration number, what its events say: the evolution action/rationale, the diagnosis no-patch reason
    and the phase moves (each `{"from", "to", "reason", "scheduled", "widened"}`, in the order they happened;
    `widened`: asked again after a narrowed phase found no patch, `saddler.run.phase_moves`)."""

    def __init__(self) -> None:
        self.evolution: dict[int, Any] = {}
        self.no_patch: dict[int, str] = {}
        self.phase_moves: dict[int, list[dict[str, Any]]] = defaultdict(list)


def _iteration_events(store: EvoDAG, rid: int, numbers: set[int]) -> _IterationEvents:
    """What the events of the iterations `numbers` say (`_IterationEvents`).

    Events are read newest first and only back to the start of the earliest iteration asked for (its events all
    come after its `iteration.started`), so `--last N` reads O(N) events, not the whole log."""
    kinds = ", ".join("?" for _ in HISTORY_EVENT_KINDS)
    rows = store.conn.execute(
        f"""SELECT kind, json_extract(payload, '$.number'), json_extract(payload, '$.iteration'),
                   json_extract(payload, '$.action'), json_extract(payload, '$.rationale'),
                   json_extract(payload, '$.reason'), json_extract(payload, '$.from'),
                   json_extract(payload, '$.to'), json_extract(payload, '$.scheduled'),
                   json_extract(payload, '$.widened')
            FROM events WHERE run_id = ? AND kind IN ({kinds}) ORDER BY id DESC""",
        (rid, *HISTORY_EVENT_KINDS),
    )
    found = _IterationEvents()
    lowest = min(numbers, default=0)
    for kind, started, number, action, rationale, reason, moved_from, moved_to, scheduled, widened in rows:
        if kind == "iteration.started":
            if started is not None and started < lowest:
                break
        elif number not in numbers:
            continue
        elif kind == "evolution.action":
            found.evolution.setdefault(number, {"action": action, "rationale": rationale or ""})
        elif kind == "phase.moved":  # newest first: each earlier move goes in front
            move = {"from": moved_from, "to": moved_to, "reason": reason or "", "scheduled": bool(scheduled),
                    "widened": bool(widened)}  # fmt: skip
            found.phase_moves[number].insert(0, move)
        else:
            found.no_patch.setdefault(number, reason or "")
    return found


def _parent_batch_scores(store: EvoDAG, iteration_ids: list[int]) -> dict[int, float]:
    """Per iteration id: the parent's mean (over tasks) train score on the iteration's batch."""
    if not iteration_ids:
        return {}
    marks = ", ".join("?" for _ in iteration_ids)
    rows = store.conn.execute(
        f"""SELECT i.id, r.task_id, avg(r.score) FROM iterations i, json_each(i.batch) b
            JOIN rollouts r ON r.node_id = i.parent_id AND r.split = 'train' AND r.task_id = b.value
            WHERE i.id IN ({marks}) GROUP BY i.id, r.task_id""",
        iteration_ids,
    )
    per_task: dict[int, list[float]] = defaultdict(list)
    for iteration_id, _task, score in rows:
        per_task[iteration_id].append(score)
    return {i: round(mean(scores), 6) for i, scores in per_task.items()}


def history(store: EvoDAG, run_id: int | None = None, last: int | None = None) -> dict[str, Any]:
    """The run's iterations in order: batch, parent, candidate, decision, batch scores, dev, intent, reason, the
    acceptance's evidence and the phase moves (`phase.moved`: the schedule's own, `scheduled`, or on evidence).

    `batch_before`/`batch_after` are the acceptance's figures stored on the candidate; without a candidate,
    `batch_before` is the parent's mean train score on the batch. `intent` is the candidate's hypothesis plan,
    else the evolution rationale. `last` keeps only the last N iterations.
    """
    rid = store._run_or_latest(run_id)
    order = "ORDER BY i.number DESC, i.id DESC" + (" LIMIT ?" if last is not None else "")
    params: tuple[Any, ...] = (rid, max(last, 0)) if last is not None else (rid,)
    rows = store.conn.execute(
        f"""SELECT i.id, i.number, i.epoch, i.phase, i.exploration, i.batch, i.parent_id, i.candidate_id, i.step,
                   i.decision, i.stall_count, i.finished_at IS NOT NULL, p.dev_mean, c.dev_mean, c.status,
                   c.origin, c.batch_before, c.batch_after, c.hypothesis, c.status_reason, i.evidence
            FROM iterations i LEFT JOIN nodes p ON p.id = i.parent_id LEFT JOIN nodes c ON c.id = i.candidate_id
            WHERE i.run_id = ? {order}""",
        params,
    ).fetchall()
    rows.reverse()
    numbers = {r[1] for r in rows}
    events = _iteration_events(store, rid, numbers)
    missing = [r[0] for r in rows if r[16] is None and r[6] is not None]
    parent_scores = _parent_batch_scores(store, missing)
    out = []
    for (iid, number, epoch, phase, exploration, batch, parent, cand, step, decision, stalls, finished, parent_dev,
         cand_dev, status, origin, before, after, hypothesis, status_reason, evidence) in rows:  # fmt: skip
        hyp = json.loads(hypothesis) if hypothesis else {}
        evo = events.evolution.get(number)
        plan = str(hyp.get("plan", "")) if isinstance(hyp, dict) else ""
        if decision == "no_training_failures":
            reason = SATURATED_REASON
        elif decision == "no_patch":
            reason = events.no_patch.get(number, "")
        else:
            reason = status_reason or ""
        out.append({
            "number": number, "epoch": epoch, "phase": phase, "exploration": bool(exploration),
            "batch": json.loads(batch), "parent_id": parent, "candidate_id": cand, "step": step,
            "decision": decision, "finished": bool(finished), "stall_count": stalls,
            "batch_before": before if before is not None else parent_scores.get(iid), "batch_after": after,
            "parent_dev": parent_dev, "candidate_dev": cand_dev, "candidate_status": status, "origin": origin,
            "intent": plan or (evo["rationale"] if evo else ""), "evolution": evo, "reason": reason,
            "evidence": decision_evidence(evidence), "phase_moves": events.phase_moves.get(number, []),
        })  # fmt: skip
    return {"run_id": rid, **metric_keys(store, rid), "iterations": out}


def metric_keys(store: EvoDAG, run_id: int) -> dict[str, Any]:
    """`metric` (the run's metric, `MetricScale.to_dict()`, or None) and `batch_metric` (whether batch figures
    stand for it too): what a document carries so its numbers can be shown in the metric's unit."""
    scale = run_metric(store, run_id)
    return {
        "metric": scale.to_dict() if scale is not None else None,
        "batch_metric": scale is not None and run_metric(store, run_id, batch=True) is not None,
    }


def _root_causes(lessons: list[Lesson]) -> list[dict[str, Any]]:
    """Lessons about the task (not `still_passing`), one entry per distinct text, in order of first sight."""
    grouped: dict[str, dict[str, Any]] = {}
    for les in lessons:
        if les.category == "still_passing":
            continue
        entry = grouped.setdefault(les.text, {"text": les.text, "categories": [], "attributions": [],
                                              "iterations": [], "count": 0})  # fmt: skip
        entry["count"] += 1
        for key, value in (("categories", les.category), ("attributions", les.attribution),
                           ("iterations", les.iteration)):  # fmt: skip
            if value is not None and value not in entry[key]:
                entry[key].append(value)
    return list(grouped.values())


def _failure_signatures(store: EvoDAG, task_id: str, rid: int) -> list[dict[str, Any]]:
    """The task's distinct train failure signatures (see `failure_signature`) with where they were seen."""
    rows = store.conn.execute(
        """SELECT node_id, rationale, failure_file, disposition FROM rollouts
           WHERE task_id = ? AND run_id = ? AND split = 'train' AND passed = 0 ORDER BY id""",
        (task_id, rid),
    )
    found: dict[str, dict[str, Any]] = {}
    for node_id, rationale, ffile, disposition in rows:
        sig = failure_signature(rationale, ffile, disposition)
        entry = found.setdefault(sig, {"signature": sig, "failure_file": ffile, "count": 0, "nodes": [],
                                       "example": rationale})  # fmt: skip
        entry["count"] += 1
        if node_id not in entry["nodes"]:
            entry["nodes"].append(node_id)
    return list(found.values())


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def task_registry(store: EvoDAG, task_id: str, rid: int, lessons: list[Lesson]) -> dict[str, Any]:
    """What the run knows about one task: root causes (lessons), failure signatures (train rollouts), every
    attempt on it (edges that fixed, regressed or still failed it, with decision and reason) and the files
    it is sensitive to (files changed by edges that fixed or regressed it)."""
    rows = store.conn.execute(
        """SELECT e.id, e.parent_id, e.child_id, e.kind, e.files_changed, t.category, n.iteration, n.origin,
                  n.status, n.status_reason, n.hypothesis, n.dev_mean, n.batch_before, n.batch_after
           FROM edge_tasks t JOIN edges e ON e.id = t.edge_id JOIN nodes n ON n.id = e.child_id
           WHERE t.task_id = ? AND e.run_id = ? AND t.category IN ('fixed', 'still_failing', 'regressed')
           ORDER BY t.edge_id""",
        (task_id, rid),
    ).fetchall()
    verdicts = {les.edge_id: les for les in lessons if les.edge_id is not None and les.category != "general"}
    attempts: list[dict[str, Any]] = []
    files: dict[str, dict[str, Any]] = {}
    for (edge_id, parent, child, kind, changed, transition, iteration, origin, status, reason, hypothesis, dev,
         before, after) in rows:  # fmt: skip
        hyp = json.loads(hypothesis) if hypothesis else {}
        hyp = hyp if isinstance(hyp, dict) else {}
        changed_files = json.loads(changed)
        lesson = verdicts.get(edge_id)
        attempts.append({
            "edge_id": edge_id, "iteration": iteration, "parent_id": parent, "child_id": child, "kind": kind,
            "origin": origin, "plan": str(hyp.get("plan", "")), "targeted": task_id in _listed(hyp.get("target_tasks")),
            "transition": transition, "attribution": lesson.attribution if lesson else None,
            "status": status, "reason": reason, "batch_before": before, "batch_after": after, "dev_mean": dev,
            "files_changed": changed_files,
        })  # fmt: skip
        if transition in ("fixed", "regressed"):
            for name in changed_files:
                entry = files.setdefault(name, {"file": name, "fixed": 0, "regressed": 0, "edges": []})
                entry[transition] += 1
                entry["edges"].append(edge_id)
    sensitive = sorted(files.values(), key=lambda f: (-(f["fixed"] + f["regressed"]), f["file"]))
    return {
        "root_causes": _root_causes(lessons),
        "failure_signatures": _failure_signatures(store, task_id, rid),
        "attempts": attempts,
        "sensitive_files": sensitive,
    }


RECENT_ITERATIONS = 15
"""How many iterations a session's history shows in full (`evo-dag history --recent`); the rest are summarized."""
_REGISTRY_ITEMS = 5  # per bounded task registry: root causes, signatures, attempts, sensitive files
_TEXT_CHARS = 200  # a free text (plan, reason, example) in the bounded form


def _cut(text: Any, limit: int = _TEXT_CHARS) -> Any:
    return text[: limit - 1] + "…" if isinstance(text, str) and len(text) > limit else text


def _earlier(store: EvoDAG, rid: int, below: int) -> dict[str, Any]:
    """A summary of the run's iterations numbered below `below`: count, decisions, the latest kept candidates."""
    rows = store.conn.execute(
        """SELECT count(*), min(number), max(number) FROM iterations WHERE run_id = ? AND number < ?""", (rid, below)
    ).fetchone()
    decisions = dict(
        store.conn.execute(
            """SELECT coalesce(decision, 'running'), count(*) FROM iterations WHERE run_id = ? AND number < ?
               GROUP BY 1 ORDER BY 1""",
            (rid, below),
        ).fetchall()
    )
    kept = store.conn.execute(
        """SELECT i.number, i.candidate_id, c.origin, c.dev_mean FROM iterations i JOIN nodes c ON c.id = i.candidate_id
           WHERE i.run_id = ? AND i.number < ? AND i.decision IN ('accepted', 'neutral')
           ORDER BY i.number DESC LIMIT ?""",
        (rid, below, _REGISTRY_ITEMS * 2),
    ).fetchall()
    return {
        "iterations": rows[0], "first": rows[1], "last": rows[2], "decisions": decisions,
        "kept": [{"number": n, "candidate_id": c, "origin": o, "candidate_dev": d} for n, c, o, d in reversed(kept)],
    }  # fmt: skip


def bounded_registry(registry: dict[str, Any]) -> dict[str, Any]:
    """A task registry (`task_registry`) cut to what a session reads at any run length: the most frequent root
    causes and failure signatures, the latest attempts (with the count of each outcome over all of them) and the
    most sensitive files; `*_total` say how many there are in all."""
    attempts = registry["attempts"]
    outcomes: dict[str, int] = defaultdict(int)
    for attempt in attempts:
        outcomes[f"{attempt['transition']}/{attempt['attribution'] or '-'}"] += 1
    causes = sorted(registry["root_causes"], key=lambda rc: -rc["count"])[:_REGISTRY_ITEMS]
    signatures = sorted(registry["failure_signatures"], key=lambda s: -s["count"])[:_REGISTRY_ITEMS]
    return {
        "root_causes": [{**rc, "text": _cut(rc["text"]), "iterations": rc["iterations"][-3:]} for rc in causes],
        "root_causes_total": len(registry["root_causes"]),
        "failure_signatures": [{**s, "example": _cut(s["example"]), "nodes": s["nodes"][-3:]} for s in signatures],
        "failure_signatures_total": len(registry["failure_signatures"]),
        "attempts": [
            {**a, "plan": _cut(a["plan"]), "reason": _cut(a["reason"]), "files_changed": a["files_changed"][:5]}
            for a in attempts[-_REGISTRY_ITEMS:]
        ],
        "attempts_total": len(attempts),
        "attempt_outcomes": dict(sorted(outcomes.items())),
        "sensitive_files": [{**f, "edges": f["edges"][-3:]} for f in registry["sensitive_files"][:_REGISTRY_ITEMS]],
    }


def recent_history(
    store: EvoDAG, run_id: int | None = None, recent: int = RECENT_ITERATIONS, tasks: list[str] | None = None
) -> dict[str, Any]:
    """The history a session reads, bounded whatever the run's length: the last `recent` iterations as `history`
    gives them (free texts cut), a summary of the earlier ones (`earlier`), and for each of `tasks` its bounded
    registry (`bounded_registry`)."""
    doc = history(store, run_id, max(recent, 0))
    rid = doc["run_id"]
    for it in doc["iterations"]:
        it["intent"], it["reason"] = _cut(it["intent"]), _cut(it["reason"])
        if it["evolution"]:
            it["evolution"] = {**it["evolution"], "rationale": _cut(it["evolution"]["rationale"])}
    first = doc["iterations"][0]["number"] if doc["iterations"] else None
    doc["earlier"] = _earlier(store, rid, first) if first is not None else None
    if tasks:
        registries = {}
        for task in dict.fromkeys(tasks):
            lessons = store.lessons(run_id=rid, task_id=task)
            registries[task] = bounded_registry(task_registry(store, task, rid, lessons))
        doc["tasks"] = registries
    return doc

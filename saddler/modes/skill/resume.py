"""Picking up an unfinished skill-mode run (the seed's 0-2: an existing workspace's autoresearch-log.json is read;
a finished run is archived and a new one starts, an unfinished one continues).

autoresearch-log.json is the record of finished iterations. Whatever the store holds beyond it (an iteration
killed before its log entry was written, its undecided or even decided nodes) is closed as invalid and the
iteration is redone, as an uninterrupted run would have done it: every idea tried in a finished iteration
(each entry's `tried_keys`: the evaluated hypothesis and those rejected before evaluation) stays excluded,
stalls are recounted from the log, and the best SKILL.md is the last kept iteration's, with its grading read
back from that iteration's files (re-evaluated only when they are missing).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.skill_evals.evals import EvalSuite
from benchmarks.skill_evals.grading import CaseResult
from evodag.decisions import KEPT_DECISIONS, SKILL_VERDICT_STATUS, stall_after
from evodag.store import EvoDAG
from saddler.modes.skill import workspace as wsp
from saddler.modes.skill.rules import Best

REDONE = "interrupted before its autoresearch-log entry; redone"


@dataclass
class ResumeState:
    log: dict[str, Any]
    best: Best
    baseline_map: dict[str, bool]
    stalls: int
    tried: set[str]


def resumable(root: Path) -> dict[str, Any] | None:
    """The unfinished run's log when the workspace holds one (with its store and repo), else None."""
    path = Path(root) / wsp.LOG_NAME
    if not path.is_file() or not (Path(root) / "evodag.sqlite").is_file() or not (Path(root) / "repo").is_dir():
        return None
    log: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return log if log.get("completed_at") is None else None


def close_unlogged(store: EvoDAG, run_id: int, done: int, root: Path) -> None:
    """Invalidate the store's iterations and nodes beyond the `done` logged iterations, drop their folders."""
    for it in store.iterations(run_id):
        if it.number > done and not (it.decision == "invalid" and it.finished_at):
            store.update_iteration(it.id, decision="invalid", step="done", finished_at=it.finished_at or store.clock())
    for node in store.nodes(run_id):
        if node.iteration > done and node.status not in ("invalid", "baseline"):
            store.update_node(node.id, status="invalid", status_reason=REDONE)
    for folder in Path(root).glob("iteration-*"):
        suffix = folder.name.removeprefix("iteration-")
        if suffix.isdigit() and int(suffix) > done:
            shutil.rmtree(folder)


def resume_state(
    ws: wsp.SkillWorkspace,
    log: dict[str, Any],
    store: EvoDAG,
    run_id: int,
    suite: EvalSuite,
    evaluate: Callable[[str], list[CaseResult]],
) -> ResumeState:
    """The loop's state after the log's last finished iteration (see the module docstring)."""
    root = ws.root
    entries: list[dict[str, Any]] = log["iterations"]
    close_unlogged(store, run_id, len(entries), root)
    run = store.get_run(run_id)
    node = store.get_node(run.baseline_node_id or 0)
    text = (root / "iteration-0" / "SKILL.md.bak").read_text(encoding="utf-8")
    best_iteration = 0
    stalls, tried = 0, set()
    for entry in entries:
        tried.update(entry.get("tried_keys", []))
        stalls = stall_after(stalls, SKILL_VERDICT_STATUS[entry["decision"]], neutral_holds=True)
        if entry["outcome"] == "kept":
            kept = [n for n in store.nodes(run_id) if n.iteration == entry["iteration"] and n.status in KEPT_DECISIONS]
            node = kept[-1]
            best_iteration = entry["iteration"]
            text = (root / f"iteration-{best_iteration}" / "SKILL.md").read_text(encoding="utf-8")
    results = ws.load_results(best_iteration, suite) or evaluate(text)
    base = json.loads((root / "iteration-0" / "benchmark.json").read_text(encoding="utf-8"))["assertion_baseline"]
    baseline_map = {f"{e}/{a}": v for e, d in base.items() for a, v in d.items()}
    return ResumeState(
        log, Best(text, results, wsp.mean_pass_rate(results), node.id, node.commit), baseline_map, stalls, tried
    )

"""Picking up an unfinished skill-mode run (the seed's 0-2: an existing workspace's autoresearch-log.json is read;
a finished run is archived and a new one starts, an unfinished one continues).

The interrupted iteration is closed as invalid (its undecided nodes too) and redone; the best SKILL.md is the
last kept iteration's; stalls and tried hypotheses are recounted from the log; the best is re-evaluated with
the same seeds (deterministic offline; with an LLM this repeats those evals once).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.skill_evals.grading import CaseResult
from evodag.store import EvoDAG
from saddler.modes.skill import workspace as wsp
from saddler.modes.skill.rules import Best

KEPT = ("accepted", "neutral")


@dataclass
class ResumeState:
    log: dict[str, Any]
    best: Best
    baseline_map: dict[str, bool]
    stalls: int
    tried: set[str]


def resumable(root: Path) -> dict[str, Any] | None:
    """The unfinished run's log when the workspace holds one (with its store and repo), else None."""
    path = Path(root) / "autoresearch-log.json"
    if not path.is_file() or not (Path(root) / "evodag.sqlite").is_file() or not (Path(root) / "repo").is_dir():
        return None
    log: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return log if log.get("completed_at") is None else None


def resume_state(
    root: Path, log: dict[str, Any], store: EvoDAG, run_id: int, evaluate: Callable[[str], list[CaseResult]]
) -> ResumeState:
    root = Path(root)
    current = store.current_iteration(run_id)
    if current is not None and current.finished_at is None:
        store.update_iteration(current.id, decision="invalid", step="done", finished_at=store.clock())
    for node in store.nodes(run_id, status="pending"):
        store.update_node(node.id, status="invalid", status_reason="interrupted before its decision; redone")
    run = store.get_run(run_id)
    node = store.get_node(run.baseline_node_id or 0)
    text = (root / "iteration-0" / "SKILL.md.bak").read_text(encoding="utf-8")
    stalls, tried = 0, set()
    for entry in log["iterations"]:
        tried.update(entry.get("tried_keys", []))
        if entry["decision"] == "KEEP":
            stalls = 0
        elif entry["decision"] != "NEUTRAL":
            stalls += 1
        if entry["outcome"] == "kept":
            kept = [n for n in store.nodes(run_id) if n.iteration == entry["iteration"] and n.status in KEPT]
            node = kept[-1]
            text = (root / f"iteration-{entry['iteration']}" / "SKILL.md").read_text(encoding="utf-8")
    results = evaluate(text)
    base = json.loads((root / "iteration-0" / "benchmark.json").read_text(encoding="utf-8"))["assertion_baseline"]
    baseline_map = {f"{e}/{a}": v for e, d in base.items() for a, v in d.items()}
    store.update_run(run_id, status="running")
    store.log_event("skill.resumed", {"after_iteration": len(log["iterations"])}, run_id=run_id)
    return ResumeState(
        log, Best(text, results, wsp.mean_pass_rate(results), node.id, node.commit), baseline_map, stalls, tried
    )

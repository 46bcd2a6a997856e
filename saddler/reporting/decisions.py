"""The acceptance decisions of a run as the report shows them: what each rested on, what it cost, how sure it was.

Read from the iterations' stored evidence (`saddler.run.closecall`): per decided candidate the verdict, P(better),
wins and losses over the tasks compared, the extra evidence rounds and their rollouts, and why gathering stopped;
plus the run's totals (how many decisions were close calls, what the evidence cost).
"""

from __future__ import annotations

from typing import Any

from evodag.history import evidence_rounds
from evodag.models import Iteration


def decisions(iterations: list[Iteration]) -> dict[str, Any]:
    """`{"rows": [...], "close_calls": n, "evidence_rollouts": n, "decided": n}` over the iterations that decided
    a candidate with stored evidence."""
    rows = []
    for it in iterations:
        ev = it.evidence or {}
        if it.candidate_id is None or "verdict" not in ev:
            continue
        rounds = evidence_rounds(ev)
        rows.append({
            "iteration": it.number, "node": it.candidate_id, "decision": it.decision, "rule": ev.get("rule"),
            "confidence": ev.get("confidence"), "wins": ev.get("wins"), "losses": ev.get("losses"),
            "tasks": ev.get("tasks"), "rounds": len(rounds), "evidence_tasks": sum(len(r["tasks"]) for r in rounds),
            "rollouts": int(ev.get("rollouts", 0)), "stopped": ev.get("stopped", ""),
        })  # fmt: skip
    return {
        "rows": rows,
        "decided": len(rows),
        "close_calls": sum(1 for r in rows if r["rounds"]),
        "evidence_rollouts": sum(r["rollouts"] for r in rows),
    }

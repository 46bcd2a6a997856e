"""`saddler status`: a snapshot of a run read from its EvoDAG, and a few lines of plain text.

The caller opens the store with `readonly=True` (a reader never blocks the loop). State: `finished` when
the run row says so. While a live process holds the run lock (`saddler.runlock`): `stopping` when
`run_dir/STOP` exists, `paused` when `run_dir/PAUSE` exists or the row says paused, else `running`. With
nobody holding it: `paused` when the row says paused, else `stopped` (the process that ran it is gone; shown as
"stopped (not running)": `saddler run` resumes it).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from evodag.metric import MetricScale, run_metric, scale_of, score_text
from evodag.models import Run
from evodag.store import EvoDAG
from saddler.control import PAUSED, STOP_REQUESTED, RunControls, read_schedule
from saddler.minimized import minimization
from saddler.sessions.usage_events import clock_time, closed_until

LAST_DECISIONS = 5


def run_state(run: Run, run_dir: Path, live: bool = True) -> str:
    """finished | stopping | paused | running | stopped, from the run row, the sentinel files and whether a
    live process holds the run lock (`live`)."""
    if run.status == "finished":
        return "finished"
    paused_row = "paused" in (run.status, run.termination_reason)
    if not live:
        return "paused" if paused_row else STOPPED
    asked = RunControls(run_dir).asked()
    if asked == STOP_REQUESTED:
        return "stopping"
    if paused_row or asked == PAUSED:
        return "paused"
    return "running"


STOPPED = "stopped"
STATE_TEXT = {STOPPED: "stopped (not running)"}


def status_snapshot(store: EvoDAG, run_dir: Path, run_id: int | None = None) -> dict[str, Any]:
    """Where the run (latest when `run_id` is None) stands, as a JSON-serialisable dict."""
    run = store.get_run(run_id)
    holder = RunControls(Path(run_dir)).holder()
    loop = run.config.get("loop", {})
    current = store.current_iteration(run.id)
    iterations = store.iterations(run.id)
    best = store.get_node(run.best_node_id) if run.best_node_id is not None else None
    base = store.get_node(run.baseline_node_id) if run.baseline_node_id is not None else None
    rows = store.rollouts(run.id)
    by_split = Counter(r.split for r in rows)
    optimizer, rollouts = store.session_cost(run.id), store.rollout_cost(run.id)
    return {
        "run_id": run.id,
        "name": run.config.get("name", "run"),
        "benchmark": run.config.get("benchmark", ""),
        "state": run_state(run, Path(run_dir), live=holder is not None),
        "running": holder is not None,
        "pid": holder or None,
        "termination_reason": run.termination_reason,
        "iteration": current.number if current else None,
        "max_iterations": loop.get("max_iterations"),
        "step": current.step if current else None,
        "phase": current.phase if current else None,
        "epoch": current.epoch if current else None,
        "batch": list(current.batch) if current else [],
        "exploration": bool(current.exploration) if current else False,
        "stall_count": current.stall_count if current else 0,
        "stall_limit": loop.get("stall_limit"),
        "last_decisions": [{"iteration": it.number, "decision": it.decision} for it in iterations[-LAST_DECISIONS:]],
        "best_node": best.id if best else None,
        "best_commit": best.commit[:7] if best else None,
        "best_dev": best.dev_mean if best else None,
        "baseline_dev": base.dev_mean if base else None,
        "rollouts": store.count_rollouts(run.id),
        "rollouts_by_split": {split: by_split.get(split, 0) for split in ("train", "dev", "test")},
        "infra_errors": sum(1 for r in rows if r.disposition == "infra_error"),
        "metric": scale.to_dict() if (scale := run_metric(store, run.id)) is not None else None,
        "waiting_until": closed_until(store, run.id),
        "minimized": _minimized(store, run.id, run.best_node_id),
        "cost_usd": {
            "optimizer": round(optimizer, 6),
            "rollouts": round(rollouts, 6),
            "total": round(optimizer + rollouts, 6),
        },
        "schedule": read_schedule(Path(run_dir)) if holder is not None else None,
    }


def _minimized(store: EvoDAG, run_id: int, best_id: int | None) -> dict[str, Any] | None:
    """The best node's minimization, if it finished: its summary line, node and rollouts."""
    found = minimization(store, run_id, best_id) if best_id is not None else None
    if found is None:
        return None
    summary = found.summary(run_metric(store, run_id))
    return {"summary": summary, "node": found.node, "rollouts": found.rollouts, "stopped": found.stopped}


def _score(x: float | None, scale: MetricScale | None = None) -> str:
    return score_text(x, scale, digits=4)


def render_status(snap: dict[str, Any]) -> str:
    """A few plain-text lines for a terminal (no colour, no trailing newline)."""
    head = f"run {snap['run_id']} {snap['name']} ({snap['benchmark']}): {STATE_TEXT.get(snap['state'], snap['state'])}"
    if snap["termination_reason"]:
        head += f" — {snap['termination_reason']}"
    if snap["iteration"] is None:
        where = "iteration —: not started"
    else:
        of = f"/{snap['max_iterations']}" if snap["max_iterations"] else ""
        where = (
            f"iteration {snap['iteration']}{of} · epoch {snap['epoch']} · phase {snap['phase'] or '—'} · "
            f"step {snap['step']} · batch {', '.join(snap['batch']) or '—'}"
        )
    if snap.get("waiting_until") is not None and snap["state"] == "running":
        where += f" · waiting for the usage window until {clock_time(snap['waiting_until'])}"
    decisions = ", ".join(f"{d['iteration']} {d['decision'] or '…'}" for d in snap["last_decisions"]) or "—"
    limit = f"/{snap['stall_limit']}" if snap["stall_limit"] else ""
    best = "—" if snap["best_node"] is None else f"node {snap['best_node']} ({snap['best_commit']})"
    split = ", ".join(f"{k} {v}" for k, v in snap["rollouts_by_split"].items())
    cost = snap["cost_usd"]
    scale = scale_of(snap.get("metric"))
    errors = snap.get("infra_errors", 0)
    infra = f" · infra errors {errors} ({100 * errors / snap['rollouts']:.1f}%, counted nowhere)" if errors else ""
    return "\n".join(
        [
            head,
            where,
            f"last decisions: {decisions}",
            f"best: {best} dev {_score(snap['best_dev'], scale)} (baseline {_score(snap['baseline_dev'], scale)})",
            f"stall {snap['stall_count']}{limit} · exploration {'on' if snap['exploration'] else 'off'}",
            *(
                [f"minimized: {m['summary']} · node {m['node']} · {m['rollouts']} rollouts"]
                if (m := snap.get("minimized"))
                else []
            ),
            f"rollouts {snap['rollouts']} ({split}) · cost ${cost['total']:.4f} "
            f"(optimizer ${cost['optimizer']:.4f}, rollouts ${cost['rollouts']:.4f}){infra}",
            *([_schedule_line(sched)] if (sched := snap.get("schedule")) else []),
        ]
    )


def _schedule_line(sched: dict[str, Any]) -> str:
    """`in flight: iterations 7, 8, 9 · sandboxes 12/32 busy, 5 queued · search ETA 1:02:03`."""
    flying = ", ".join(str(n) for n in sched.get("in_flight", [])) or "none"
    eta = sched.get("search_eta_s")
    when = "?" if eta is None else f"{int(eta) // 3600}:{int(eta) % 3600 // 60:02d}:{int(eta) % 60:02d}"
    return (
        f"in flight: iterations {flying} (up to {sched.get('parallel_iterations')}) · sandboxes "
        f"{sched.get('busy')}/{sched.get('sandboxes')} busy, {sched.get('queued')} queued · search ETA {when}"
    )

"""The cheat audit in the loop (`policies.audit`, the checks in `saddler.policies.audit`).

A candidate's diff is audited when diagnosis commits it, its train rollouts on the batch once they ran. A hit is
recorded as an `audit.suspect` event (node, iteration, where, the sealed reason, whether it was refused) and
marks the node: under `refuse` it is an invalid candidate whose reason (`suspect: …`) the next diagnosis is
shown (`diagnosis.Excluded.refused`); under `warn` it is judged as usual and its reason starts with the mark.
"""

from __future__ import annotations

from evodag.models import Event, Iteration, Node, RolloutRow
from saddler.benchmark import RolloutResult
from saddler.policies.audit import AUDIT_EVENT, Auditor, suspect_reason
from saddler.run.context import RunContext

_AUDITORS: dict[int, tuple[object, Auditor]] = {}


def auditor(ctx: RunContext) -> Auditor:
    """The run's `Auditor`, built once per benchmark object."""
    held = _AUDITORS.get(id(ctx.benchmark))
    if held is None or held[0] is not ctx.benchmark:
        held = (ctx.benchmark, Auditor(ctx.benchmark, ctx.tasks, ctx.space.config.components.protected))
        _AUDITORS.clear()
        _AUDITORS[id(ctx.benchmark)] = held
    return held[1]


def refuses(ctx: RunContext) -> bool:
    return ctx.cfg.policies.audit == "refuse"


def diff_suspect(ctx: RunContext, parent: str, commit: str) -> str:
    """`suspect: …` for what the change parent→commit adds that it must not; '' when clean or the audit is off."""
    if ctx.cfg.policies.audit == "off":
        return ""
    return suspect_reason(auditor(ctx).diff_hits(ctx.space.diff(parent, commit)))


def trace_suspect(ctx: RunContext, rows: list[RolloutRow]) -> str:
    """`suspect: …` for reads of evaluation or protected files in `rows`' traces; '' when none or off."""
    if ctx.cfg.policies.audit == "off":
        return ""
    results = [
        (r.split, RolloutResult(r.task_id, r.score, r.passed, r.disposition, trace_path=r.trace_path)) for r in rows
    ]
    return suspect_reason(auditor(ctx).trace_hits(results))


def record(ctx: RunContext, it: Iteration, node: Node, where: str, reason: str) -> None:
    """Store the hit on `node` once (a resumed iteration audits again and finds it stored)."""
    if any(e.payload.get("node_id") == node.id and e.payload.get("where") == where for e in hits(ctx)):
        return
    payload = {"node_id": node.id, "iteration": it.number, "where": where, "reason": reason, "refused": refuses(ctx)}
    ctx.store.log_event(AUDIT_EVENT, payload, run_id=ctx.run_id)


def hits(ctx: RunContext) -> list[Event]:
    """Every `audit.suspect` event of the run, oldest first."""
    return ctx.store.events(run_id=ctx.run_id, kind=AUDIT_EVENT)


def marked(ctx: RunContext, node: Node, reason: str) -> str:
    """`reason` with the node's audit mark in front (a `warn` hit); `reason` itself when it has none."""
    found = [e.payload["reason"] for e in hits(ctx) if e.payload.get("node_id") == node.id]
    return "; ".join([*found, reason]) if found else reason

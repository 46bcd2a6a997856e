"""Branches meet by cherry-pick: a change accepted on a parent the line has moved on from is carried onto the latest
kept node before dev judges it (several iterations in flight).

With `loop.parallel_iterations` above one, an iteration diagnoses and verifies its change on the parent it started
from, while the others keep changes of their own. When its change is kept on train (accepted, or a stepping stone)
and the latest kept node
(`saddler.run.flights.latest_kept`) is no longer its parent, the change is cherry-picked onto that node (a real
commit, a `cherry_pick` node and edge whose source is the candidate's edge, as evolution's cherry-picks are), and dev
judges the carried node against the latest kept node, as it judges any candidate against its parent: the dev race,
the dev guard. So the line accumulates every accepted change, as the serial loop's does, instead of leaving each on
a branch of its own. The candidate shares the carried node's verdict (its change is what dev judged). Kept changes
join the line one at a time, as a merge queue takes them (the loop holds `the line` from the carry to the end of the
iteration), so each is carried onto the one before.

A change that no longer applies there (a conflict) is judged on its own parent, as before. A change the latest kept
node already holds ("nothing left to change": another iteration wrote the same fix) keeps the candidate as it was
decided on train, with no dev evaluation: the line has it already.
"""

from __future__ import annotations

from dataclasses import dataclass

from evodag.decisions import KEPT_DECISIONS
from evodag.models import Iteration, Node
from saddler.policies.acceptance import AcceptanceDecision
from saddler.run import audit, flights, transplant
from saddler.run.context import RunContext
from saddler.sessions.schema import EvolutionResult, SessionStats

EVIDENCE_KEY = "carried"
"""The iteration evidence that records a carried change: `{"node", "onto", "held"}`."""
NOTHING_LEFT = "nothing left to change"


@dataclass(frozen=True)
class Carried:
    """What dev judges for an iteration: `node` against `against` (the candidate and its parent, unless carried);
    `held`: the latest kept node has the change already (nothing to judge)."""

    node: Node
    against: Node
    held: bool = False


def target(
    ctx: RunContext, it: Iteration, parent: Node, cand: Node, verdict: AcceptanceDecision, baseline: Node
) -> Carried:
    """Where dev judges `cand`'s change (see the module docstring). A resumed iteration finds the node it made."""
    if verdict.verdict not in KEPT_DECISIONS or ctx.pipeline.iterations <= 1:
        return Carried(cand, parent)
    stored = (ctx.store.get_iteration(it.id).evidence or {}).get(EVIDENCE_KEY)
    if stored is not None:
        onto = ctx.store.get_node(int(stored["onto"]))
        node = ctx.store.get_node(int(stored["node"])) if stored.get("node") is not None else cand
        return Carried(node, onto, bool(stored.get("held")))
    latest = flights.latest_kept(ctx, ctx.iterations.read(), baseline)
    if latest.id == parent.id or latest.id == cand.id:
        return Carried(cand, parent)
    edge = ctx.store.edge_between(parent.id, cand.id)
    why = f"carry n{cand.id}'s change (iteration {it.number}) onto the latest kept node n{latest.id}"
    result = EvolutionResult(
        action="cherry_pick", parent_node_id=latest.id, edge_ids=[edge.id], rationale=why,
        stats=SessionStats(backend="saddler"),
    )  # fmt: skip
    made = transplant.apply_action(ctx.store, ctx.space, ctx.run_id, it.number, it.phase, result)
    if made is None or made.node is None:
        held = made is not None and NOTHING_LEFT in made.error
        if held:
            ctx.note_evidence(it, EVIDENCE_KEY, {"node": None, "onto": latest.id, "held": True})
            return Carried(cand, latest, held=True)
        return Carried(cand, parent)  # a conflict: judged where it was written
    node = ctx.store.update_node(  # what the carried node holds is the candidate's change: its hypothesis says so
        made.node.id, hypothesis={**(cand.hypothesis or {}), "carried": {"from": cand.id, "onto": latest.id}}
    )
    suspect = audit.diff_suspect(ctx, latest.commit, node.commit)
    if suspect and audit.refuses(ctx):
        ctx.store.update_node(node.id, status="invalid", status_reason=f"carried change: {suspect}")
        return Carried(cand, parent)
    ctx.note_evidence(it, EVIDENCE_KEY, {"node": node.id, "onto": latest.id, "held": False})
    return Carried(node, latest)

"""A tie that train could not show goes to dev (`policies.unseen_tie_on_dev`).

A close call's evidence (`saddler.run.closecall`) can end with no task moved either way on every train task compared.
When among those rollouts the parent failed some task the hypothesis targets, the tie is evidence: the change was
where it should show and did nothing there (or, when the failure moved, a stepping stone: `saddler.run.stepping_stone`).
When it failed none — an exploration hypothesis names no target, or the targeted failures were not among the tasks
compared — the tie says nothing about the change: the tasks it would fix were not there to fix. On the offline
benchmarks that is the most common way a run loses its DAG's best: an exploration patch (opsdesk's retry with
backoff) is tried on a batch without the failure it fixes, rejected for futility, and never written again.

The rule, after the decision on train ended in a rejection:

- no win and no loss over everything compared;
- no rollout of the parent on a task the hypothesis targets failed among the rows compared ("unseen");
- dev is evaluated at all (`policies.dev_eval` is not `never`).

Then the candidate is evaluated on dev, as a kept candidate would be, and accepted when its paired comparison with
its parent over the dev tasks reaches the acceptance's confidence and its dev mean is higher; otherwise it stays
rejected, its dev score stored. The dev guard still runs after it. Only aggregates go into the reason and into the
iteration's evidence (`unseen_tie`: the dev confidence, the dev tasks compared, whether it was kept).
"""

from __future__ import annotations

from dataclasses import replace

from evodag.decisions import ACCEPTED, REJECTED
from evodag.models import Iteration, Node, RolloutRow
from saddler.config import PolicyConfig
from saddler.policies.acceptance import AcceptanceDecision, clearly_better
from saddler.run.context import RunContext
from saddler.run.stepping_stone import target_tasks

UNSEEN_MARK = "a tie train could not show"
"""The words the decision reason of a tie sent to dev carries."""


def train_saw_target(cand: Node, before: list[RolloutRow]) -> bool:
    """Whether the parent (`before`: its compared rollouts) failed some task `cand`'s hypothesis targets."""
    targets = set(target_tasks(cand))
    return any(r.task_id in targets and not r.passed for r in before)


def goes_to_dev(policies: PolicyConfig, cand: Node, verdict: AcceptanceDecision, before: list[RolloutRow]) -> bool:
    """Whether the rule of the module docstring sends this decision to dev."""
    return (
        policies.unseen_tie_on_dev
        and policies.dev_eval != "never"
        and verdict.verdict == REJECTED
        and verdict.wins == verdict.losses == 0.0
        and not train_saw_target(cand, before)
    )


def decide_on_dev(
    ctx: RunContext, it: Iteration, parent: Node, cand: Node, verdict: AcceptanceDecision
) -> AcceptanceDecision:
    """`verdict`, or an acceptance when `cand` (with its dev score) is better than `parent` on dev by the
    acceptance's paired rule; the comparison's aggregates are stored on the iteration either way."""
    if cand.dev_mean is None or parent.dev_mean is None:
        return verdict
    dev = ctx.compare_on_dev(parent, cand, len(ctx.dev_seeds))
    higher = cand.dev_mean > parent.dev_mean if cand.dev_tasks is None else dev.after > dev.before  # raced: paired
    kept = clearly_better(dev.confidence, ctx.acceptance.confidence) and higher
    ctx.note_evidence(it, "unseen_tie", {"confidence": dev.confidence, "tasks": len(dev.compared), "kept": kept})
    if not kept:
        return verdict
    why = (
        f"{verdict.reason}; accepted: {UNSEEN_MARK} (no targeted failure among the tasks compared), better on dev "
        f"({parent.dev_mean:.3f} -> {cand.dev_mean:.3f}, P(better) {dev.confidence:.2f} over {len(dev.compared)} "
        "dev task(s))"
    )
    return replace(verdict, verdict=ACCEPTED, reason=why)

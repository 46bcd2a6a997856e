"""Step 6 of an iteration: the acceptance decision, and the evidence a close call gathers before it is made.

The candidate is first compared with its parent on the batch (same tasks, same seeds). A sequential acceptance
(`saddler.policies.acceptance`) may call that a close call: a tie, or a difference inside what one batch can
tell. Then evidence is gathered in rounds of as many train tasks as the batch, each round run on parent and
candidate (cached rollouts reused), and the acceptance is asked again after each round: it stops as soon as the
decision is clear, stops for futility when a round still shows no task moved either way (a change with no
measurable effect), and decides on everything gathered when the next round would pass the per-decision rollout
cap (`policies.evidence_max_rollouts`; 0 = 4 x batch size x repetitions, two rounds; at most `MAX_ROUNDS`).

Which tasks (`plan_rounds`): half of every round comes from where a fix should show — train tasks the parent is
known to fail with a failure signature the batch's failing tasks share, then tasks it is known to fail otherwise,
then tasks its lineage never ran — and half from where a regression would show — tasks it is known to pass, then
never-run ones. Once train has no task left, a round is one more repetition (the next seed) of tasks already
compared. The plan is made once and stored on the iteration before the first round runs, so a resumed run gathers
the same evidence (paying only for what it had not run).

Every decision stores its evidence on the iteration (`evidence`): the rule, wins, losses, the confidence, the
number of tasks compared, the plan and how many of its rounds ran (with the confidence after each), why it
stopped, and the rollouts the evidence cost (rows stored after the plan was made).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any

from evodag.decisions import CLOSE
from evodag.history import failure_signature
from evodag.models import Iteration, Node, RolloutRow
from evodag.queries import lineage_train_outcomes
from saddler.policies.acceptance import AcceptanceDecision, close_call, task_outcomes
from saddler.run.context import RunContext
from saddler.run.outcomes import split_seeds

MAX_ROUNDS = 32
"""The most rounds one plan holds, whatever the cap (a plan is stored whole before its first round runs)."""


@dataclass(frozen=True)
class Round:
    """Tasks to run on parent and candidate: at the run's train repetitions (`repetition` None), or at one more
    repetition `repetition` (its own seed)."""

    tasks: tuple[str, ...]
    repetition: int | None = None

    def cost(self, repetitions: int) -> int:
        """The most rollouts the round can store: every task on both nodes."""
        return 2 * len(self.tasks) * (repetitions if self.repetition is None else 1)

    def to_json(self) -> dict[str, Any]:
        return {"tasks": list(self.tasks), "repetition": self.repetition}


def evidence_cap(ctx: RunContext) -> int:
    """The rollouts one close call may spend (`policies.evidence_max_rollouts`, 0 = two rounds)."""
    configured = ctx.cfg.policies.evidence_max_rollouts
    return configured or 4 * ctx.cfg.loop.batch_size * len(ctx.train_seeds)


def plan_rounds(
    batch: list[str],
    batch_signatures: set[str],
    known: dict[str, str | None],
    train: list[str],
    repetitions: int,
    cap: int,
    label: str,
) -> list[Round]:
    """The evidence rounds for a close call on `batch` (see the module docstring), as many as `cap` rollouts allow.

    `known` maps the train tasks the parent's lineage ran to their failure signature (None: passed);
    `batch_signatures` are the signatures of the parent's failures on the batch; `label` seeds the shuffles."""
    size = len(batch)
    if size == 0:
        return []
    rng = random.Random(f"evidence:{label}")

    def shuffled(tasks: list[str]) -> list[str]:
        tasks = sorted(tasks)
        rng.shuffle(tasks)
        return tasks

    rest = [t for t in train if t not in set(batch)]
    unknown = shuffled([t for t in rest if t not in known])
    same = shuffled([t for t in rest if t in known and known[t] is not None and known[t] in batch_signatures])
    failing = shuffled([t for t in rest if t in known and known[t] is not None and known[t] not in batch_signatures])
    passing = shuffled([t for t in rest if t in known and known[t] is None])
    fix_pool, guard_pool = same + failing + unknown, passing + unknown
    rounds: list[Round] = []
    taken: set[str] = set()

    def take(pool: list[str]) -> str | None:
        while pool and pool[0] in taken:
            pool.pop(0)
        return pool.pop(0) if pool else None

    budget = cap
    while True:
        picked: list[str] = []
        while len(picked) < size:
            had = len(picked)
            for pool in (fix_pool, guard_pool):
                task = take(pool) if len(picked) < size else None
                if task is not None:
                    taken.add(task)
                    picked.append(task)
            if len(picked) == had:
                break
        if not picked:
            break
        new = Round(tuple(picked))
        if new.cost(repetitions) > budget or len(rounds) == MAX_ROUNDS:
            return rounds
        rounds.append(new)
        budget -= new.cost(repetitions)
    compared = list(batch) + [t for r in rounds for t in r.tasks]
    repetition = repetitions
    while True:  # train is spent: one more repetition of the tasks compared so far, a batch at a time
        for start in range(0, len(compared), size):
            again = Round(tuple(compared[start : start + size]), repetition)
            if again.cost(repetitions) > budget or len(rounds) == MAX_ROUNDS:
                return rounds
            rounds.append(again)
            budget -= again.cost(repetitions)
        repetition += 1


def decide(
    ctx: RunContext, it: Iteration, parent: Node, cand: Node, before: list[RolloutRow], after: list[RolloutRow]
) -> tuple[AcceptanceDecision, list[RolloutRow], list[RolloutRow]]:
    """The acceptance decision for `cand` against `parent`, with the rows it rests on (the batch's, plus any
    evidence gathered); the decision's evidence is stored on the iteration."""
    acceptance = ctx.acceptance
    verdict = acceptance.decide(task_outcomes(before), task_outcomes(after), final=not acceptance.gathers_evidence)
    if verdict.verdict != CLOSE:
        _store(ctx, it, verdict, [], 0, "clear on the batch")
        return verdict, before, after
    stored = it.evidence or {}
    if "plan" not in stored:
        stored = {"plan": [r.to_json() for r in _plan(ctx, it, parent, before)], "first_rollout": _next_id(ctx)}
        it = ctx.store.update_iteration(it.id, evidence=stored)
    plan = [Round(tuple(r["tasks"]), r["repetition"]) for r in stored["plan"]]
    before, after = list(before), list(after)
    done: list[float] = []  # the confidence after each round run
    futile = False
    for i, rnd in enumerate(plan):
        on_parent, on_cand = ctx.together(*(functools.partial(_run_round, ctx, node, rnd) for node in (parent, cand)))
        before += on_parent
        after += on_cand
        verdict = acceptance.decide(task_outcomes(before), task_outcomes(after), final=i == len(plan) - 1)
        done.append(verdict.confidence)
        futile = verdict.verdict == CLOSE and verdict.wins == verdict.losses == 0.0
        if verdict.verdict != CLOSE or futile:
            break
    if not plan or futile:
        verdict = acceptance.decide(task_outcomes(before), task_outcomes(after), final=True)
    clear = not close_call(verdict.confidence, acceptance.confidence)
    if futile:
        stopped = f"no task moved either way on {len(verdict.compared)} task(s): stopped for futility"
    elif clear:
        stopped = f"clear after {len(done)} round(s)"
    else:
        stopped = f"the evidence cap was reached after {len(done)} round(s)"
    first = int(stored["first_rollout"])
    spent = sum(1 for r in before + after if r.id >= first)
    _store(ctx, it, verdict, done, spent, stopped, stored)
    return verdict, before, after


def _plan(ctx: RunContext, it: Iteration, parent: Node, before: list[RolloutRow]) -> list[Round]:
    known = {task: o["signature"] for task, o in lineage_train_outcomes(ctx.store, parent.id).items()}
    signatures = {failure_signature(r.rationale, r.failure_file, r.disposition) for r in before if not r.passed}
    return plan_rounds(
        list(it.batch),
        signatures,
        known,
        [t.id for t in ctx.tasks["train"]],
        len(ctx.train_seeds),
        evidence_cap(ctx),
        f"{ctx.cfg.seed}:{it.number}",
    )


def _run_round(ctx: RunContext, node: Node, rnd: Round) -> list[RolloutRow]:
    if rnd.repetition is None:
        return ctx.eval_batch(node, list(rnd.tasks))
    seed = split_seeds(ctx.cfg.seed, "train", rnd.repetition + 1)[rnd.repetition]
    tasks = [ctx.task_index[t] for t in rnd.tasks]
    return ctx.evaluator.evaluate(node, tasks, "train", [seed], first_repetition=rnd.repetition)


def _next_id(ctx: RunContext) -> int:
    return ctx.store.last_rollout_id() + 1


def _store(
    ctx: RunContext,
    it: Iteration,
    verdict: AcceptanceDecision,
    rounds: list[float],
    spent: int,
    stopped: str,
    stored: dict[str, Any] | None = None,
) -> None:
    evidence = {
        **(stored or {}),
        "rule": ctx.acceptance.measure,
        "verdict": verdict.verdict,
        "confidence": verdict.confidence,
        "wins": verdict.wins,
        "losses": verdict.losses,
        "tasks": len(verdict.compared),
        "rounds_run": len(rounds),
        "round_confidence": rounds,
        "rollouts": spent,
        "stopped": stopped,
    }
    ctx.store.update_iteration(it.id, evidence=evidence)

"""When a cut stands (`saddler.run.minimize`): the smaller harness on dev against the harness it was cut from and
against the full best, compared as acceptance compares two nodes (`Acceptance.decide`: task by task on the tasks
valid in both, P(better) from the paired sign test).

`minimize.rule`: `not_lower` (the default) keeps the cut when the smaller harness's dev score is not lower than
either reference's; `not_clearly_worse` keeps it unless P(better) is at most 1 - `acceptance_confidence` against
either (the test of `policies.dev_guard`), which forgives the loss of one or two tasks.

Dev is a small sample: a change no dev task needs may still be what fixes train tasks (those its edge was accepted
on, or others since; a benchmark held out by repository or domain puts their kin only in test). So a cut dev
allows is also run on train (`judge_train`, `minimize.train_check`): "all" (the default) runs the smaller harness
on every train task as a batch runs (the train seeds, the noise rule) and compares it, by the same rule, with the
harness it was cut from and the full best; "fixed" only on the tasks the change's source edge fixed (`Edge.fixed`,
measured from the batch's scores) against that edge's node; "off" leaves dev alone to decide. Lower there, the cut
is refused. Train was seen by the search, so it can only keep a change dev cannot see, never remove one. A change
dev does see, hurting (the cut clearly better on dev: P(better) at least `acceptance_confidence` against both
references), is kept only when train finds the cut clearly worse (P(better) at most 1 - it), whatever the rule:
one train task lower does not outweigh a dev clearly better, and the run returns the harness dev ranks first.

Rollouts cost money, so dev runs a few tasks at a time (twice the executor's workers), the tasks the lineage gained
first (the baseline fails them, the full best passes them: where a cut loses), and stops as soon as the cut is sure
to be refused whatever the remaining tasks show: the difference so far plus the most they could add (1 - the
reference's score on each) is still a loss (`not_lower`), or still leaves P(better) at or below the floor
(`not_clearly_worse`). A change that carries weight is usually found out after its first lost tasks. Never under
`policies.acceptance = "pass_count"` (it compares pass shares, which the bound does not).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from evodag.models import Edge, Node, RolloutRow
from saddler.benchmark import Task
from saddler.policies.acceptance import (
    AcceptanceDecision,
    TaskOutcome,
    better_confidence,
    clearly_better,
    clearly_worse,
)
from saddler.run.context import RunContext
from saddler.run.outcomes import task_outcomes


@dataclass(frozen=True)
class Verdict:
    """`worse`: the cut is refused; `confidence`: the smaller harness's P(better), the lower of the two; `points`:
    what the cut changes carried (dev of the harness they were cut from minus dev without them; on an early stop,
    their difference on the tasks run, over every dev task); `tasks`: the dev tasks run (fewer on an early stop)."""

    worse: bool
    confidence: float
    points: float
    tasks: int
    reason: str


def judge(ctx: RunContext, cand: Node, current: Node, best: Node, baseline: Node) -> Verdict:
    """Evaluate `cand` on dev (stopping early when it is sure to be refused) and decide the cut."""
    rule, kind = ctx.cfg.minimize.rule, ctx.score_kind
    refs = [task_outcomes(_dev_rows(ctx, n)) for n in (current, best)]
    tasks = _order(ctx, refs[1], task_outcomes(_dev_rows(ctx, baseline)))
    chunk = max(1, 2 * ctx.cfg.executor.workers)
    early = ctx.acceptance.measure != "pass_count"
    rows: list[RolloutRow] = []
    for start in range(0, len(tasks), chunk):
        rows += ctx.evaluator.evaluate(cand, tasks[start : start + chunk], "dev", ctx.dev_seeds)
        rest = tasks[start + chunk :]
        got = task_outcomes(rows)
        if rest and early and any(_surely_refused(ref, got, rest, rule, kind, ctx) for ref in refs):
            diff = _sums(refs[0], got, kind)
            points = round((diff[1] - diff[0]) / len(tasks), 9)
            confidence = min(better_confidence(*_sums(ref, got, kind)) for ref in refs)
            ran = len(tasks) - len(rest)
            why = f"lower on {ran} of {len(tasks)} dev task(s) whatever the rest show: stopped, kept"
            return Verdict(True, confidence, points, ran, why)
    cand = ctx.eval_dev(cand)  # every row is stored: this only computes and records its dev score
    decided = [ctx.acceptance.decide(ref, task_outcomes(rows), final=False) for ref in refs]
    confidence = min(d.confidence for d in decided)
    worse = _refused(ctx, decided)
    if rule == "not_clearly_worse":
        verdict = "clearly worse, kept" if worse else "not clearly worse, removed"
    else:
        verdict = "lower, kept" if worse else "not lower, removed"
    points = round((current.dev_mean or 0.0) - (cand.dev_mean or 0.0), 9)
    why = (
        f"dev {_dev(current)} -> {_dev(cand)}, P(better) {decided[0].confidence:.2f} against n{current.id} and "
        f"{decided[1].confidence:.2f} against the full n{best.id}: {verdict}"
    )
    return Verdict(worse, confidence, points, len(tasks), why)


@dataclass(frozen=True)
class TrainCheck:
    """The cut on train: `lost` of `tasks` lower than on a reference; `worse` when the rule refuses it;
    `reference_rollouts` the rows stored for the references' train runs (not the cut's own: those are on its node)."""

    worse: bool
    tasks: int
    lost: int
    reason: str
    reference_rollouts: int = 0


def judge_train(
    ctx: RunContext, cand: Node, current: Node, best: Node, edge: Edge | None, dev_confidence: float = 0.5
) -> TrainCheck | None:
    """The cut `cand` on train, run as a batch runs (the train seeds, the noise rule) and decided by
    `minimize.rule`, or by `not_clearly_worse` when dev found the cut clearly better (`dev_confidence`, its
    `Verdict.confidence`, at least the acceptance confidence). `minimize.train_check`: "all" compares it on every
    train task with `current` (the harness it was cut from) and the full `best`; "fixed" on the tasks `edge` fixed
    with `edge`'s node on its stored rows. None when there is nothing to check ("off", or "fixed" with no edge or no
    fixed task still in train)."""
    mode, store, kind = ctx.cfg.minimize.train_check, ctx.store, ctx.score_kind
    if mode == "off":
        return None
    train = [t.id for t in ctx.tasks["train"]]
    before = store.count_rollouts(ctx.run_id)
    if mode == "fixed":
        in_train = set(train)
        ids = [t for t in (edge.fixed if edge else []) if t in in_train]
        if edge is None or not ids:
            return None
        stored = store.rollouts(run_id=ctx.run_id, node_id=edge.child_id, split="train")
        refs = [task_outcomes([r for r in stored if r.task_id in ids])]
        where = "train task(s) its edge fixed"
    else:
        ids = train
        refs = [
            task_outcomes(rows)
            for rows in ctx.together(*(functools.partial(ctx.eval_batch, n, ids) for n in (current, best)))
        ]
        where = "train task(s)"
    paid_for_refs = store.count_rollouts(ctx.run_id) - before
    got = task_outcomes(ctx.eval_batch(cand, ids))
    lost = max(
        sum(1 for t in ids if t in ref and t in got and got[t].value(kind) < ref[t].value(kind) - 1e-12) for ref in refs
    )
    dev_clear = clearly_better(dev_confidence, ctx.acceptance.confidence)
    rule = "not_clearly_worse" if dev_clear else ctx.cfg.minimize.rule
    worse = _refused(ctx, [ctx.acceptance.decide(ref, got, final=False) for ref in refs], rule)
    if dev_clear:
        verdict = "clearly worse there, kept" if worse else "not clearly worse there and clearly better on dev"
    else:
        verdict = "lower there, kept" if worse else "not lower there"
    return TrainCheck(
        worse, len(ids), lost, f"{lost} of {len(ids)} {where} lower without it ({verdict})", paid_for_refs
    )


def _refused(ctx: RunContext, decided: list[AcceptanceDecision], rule: str | None = None) -> bool:
    """Whether `rule` (default `minimize.rule`) refuses a cut compared with each reference as `decided`:
    `not_lower` when it is lower than any; `not_clearly_worse` when its lowest P(better) is at most 1 - the
    acceptance confidence."""
    if (rule or ctx.cfg.minimize.rule) == "not_clearly_worse":
        return clearly_worse(min(d.confidence for d in decided), ctx.acceptance.confidence)
    return any(d.after < d.before - 1e-12 for d in decided)


def _dev_rows(ctx: RunContext, node: Node) -> list[RolloutRow]:
    """`node`'s dev rollouts at the run's dev seeds (stored already for a dev-evaluated node: nothing runs)."""
    return ctx.evaluator.evaluate(node, ctx.tasks["dev"], "dev", ctx.dev_seeds)


def _order(ctx: RunContext, best: dict[str, TaskOutcome], baseline: dict[str, TaskOutcome]) -> list[Task]:
    """The dev tasks, those the lineage gained (best above baseline) first, then the others, each in dev order."""
    kind = ctx.score_kind

    def gained(task_id: str) -> bool:
        b, a = baseline.get(task_id), best.get(task_id)
        return a is not None and b is not None and a.value(kind) > b.value(kind)

    tasks = ctx.tasks["dev"]
    return [t for t in tasks if gained(t.id)] + [t for t in tasks if not gained(t.id)]


def _sums(ref: dict[str, TaskOutcome], got: dict[str, TaskOutcome], kind: str) -> tuple[float, float]:
    """(wins, losses) of `got` against `ref` on the tasks valid in both."""
    diffs = [got[t].value(kind) - ref[t].value(kind) for t in got if t in ref and got[t].valid and ref[t].valid]
    return sum(d for d in diffs if d > 0), -sum(d for d in diffs if d < 0)


def _surely_refused(
    ref: dict[str, TaskOutcome], got: dict[str, TaskOutcome], rest: list[Task], rule: str, kind: str, ctx: RunContext
) -> bool:
    """Whether the cut is refused against `ref` even if every task of `rest` went the smaller harness's way."""
    wins, losses = _sums(ref, got, kind)
    headroom = sum(1.0 - ref[t.id].value(kind) for t in rest if t.id in ref and ref[t.id].valid)
    if rule == "not_clearly_worse":
        return clearly_worse(better_confidence(wins + headroom, losses), ctx.acceptance.confidence)
    return wins + headroom < losses - 1e-12


def _dev(node: Node) -> str:
    return "—" if node.dev_mean is None else f"{node.dev_mean:.3f}"

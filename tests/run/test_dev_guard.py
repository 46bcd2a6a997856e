"""The dev guard (`RunContext.guard_on_dev`) on a real run folder and EvoDAG, with a fake dev evaluator: a veto
is decided on one pass of dev only when that pass is already clear (`policies.dev_guard_evidence`,
`acceptance.dev_guard_clear`); a loss one more repetition does not confirm keeps the candidate, one it confirms
still vetoes it, and the node's `dev_mean` stays the run's own dev score."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fake_dev import FakeDev

from evodag.models import Node
from saddler.policies.acceptance import AcceptanceDecision, better_confidence
from saddler.run.context import RunContext
from saddler.run.loop import Optimizer
from saddler.run.outcomes import split_seeds
from saddler.scoring import node_score

ACCEPTED = AcceptanceDecision("accepted", "strict improvement", 0.5, 0.75, confidence=0.9, wins=3.0)


@pytest.fixture
def guarded(
    tmp_path: Path, open_run_context: Callable[..., RunContext]
) -> Iterator[tuple[RunContext, FakeDev, Node, Node]]:
    """An opsdesk run with its baseline and one candidate on the same commit, both still without a dev score."""
    ctx = open_run_context(tmp_path / "run", "opsdesk", FakeDev)
    fake: FakeDev = ctx.evaluator  # type: ignore[assignment]
    base = Optimizer._baseline_node(ctx)
    cand = ctx.store.add_node(ctx.run_id, base.commit, base.id, 1, "capability", "capability", "patch")
    fake.cand = cand.id
    yield ctx, fake, base, cand


def _guard(ctx: RunContext, base: Node, cand: Node) -> tuple[AcceptanceDecision, dict[str, object]]:
    it = ctx.store.start_iteration(ctx.run_id, 1, 0, ["t1"], parent_id=base.id)
    ctx.store.update_iteration(it.id, evidence={"verdict": "accepted"})  # the decision's own, kept
    base, cand = ctx.eval_dev(base), ctx.eval_dev(cand)
    verdict = ctx.guard_on_dev(it, base, cand, ACCEPTED)
    return verdict, ctx.store.get_iteration(it.id).evidence or {}


def test_a_loss_on_one_pass_of_dev_that_the_next_repetition_does_not_confirm_is_kept(
    guarded: tuple[RunContext, FakeDev, Node, Node],
) -> None:
    ctx, fake, base, cand = guarded
    fake.fails = (3, 0)  # three dev tasks lost on the run's dev pass: P(better) 0.06, alone a veto
    fake.parent_fails = (0, 3)  # the next pass loses three others on the parent: noise, both ways
    verdict, evidence = _guard(ctx, base, cand)
    assert verdict == ACCEPTED
    guard = evidence["dev_guard"]
    assert evidence["verdict"] == "accepted" and guard["repetitions"] == 2 and guard["confidence"] > 0.2  # type: ignore[index]
    extra = [(node, rep) for node, rep, _ in fake.calls if rep == 1]
    assert extra == [(base.id, 1), (cand.id, 1)]  # one more repetition of dev, on both nodes
    dev = ctx.tasks["dev"]
    rows = ctx.store.rollouts(run_id=ctx.run_id, node_id=cand.id, split="dev")
    assert ctx.store.get_node(cand.id).dev_mean == node_score([r for r in rows if r.repetition == 0], "pass_rate").mean
    assert ctx.store.get_node(cand.id).dev_mean == pytest.approx((len(dev) - 3) / len(dev))


def test_a_loss_the_next_repetition_confirms_is_vetoed_with_both_passes_in_the_reason(
    guarded: tuple[RunContext, FakeDev, Node, Node],
) -> None:
    ctx, fake, base, cand = guarded
    fake.fails = (3, 3)
    verdict, evidence = _guard(ctx, base, cand)
    assert verdict.verdict == "rejected"
    assert "not kept: worse than its parent on dev" in verdict.reason and "2 repetitions" in verdict.reason
    assert evidence["dev_guard"]["repetitions"] == 2 and evidence["dev_guard"]["confidence"] <= 0.2  # type: ignore[index]


def test_no_loss_on_dev_costs_no_second_pass(guarded: tuple[RunContext, FakeDev, Node, Node]) -> None:
    ctx, fake, base, cand = guarded
    verdict, evidence = _guard(ctx, base, cand)
    assert verdict == ACCEPTED and evidence["dev_guard"]["repetitions"] == 1  # type: ignore[index]
    assert all(rep == 0 for _, rep, _ in fake.calls)


def test_without_dev_guard_evidence_one_pass_vetoes(guarded: tuple[RunContext, FakeDev, Node, Node]) -> None:
    ctx, fake, base, cand = guarded
    policies = ctx.cfg.policies.model_copy(update={"dev_guard_evidence": False})
    ctx.cfg = ctx.cfg.model_copy(update={"policies": policies})
    fake.fails, fake.parent_fails = (3, 0), (0, 3)
    verdict, evidence = _guard(ctx, base, cand)
    assert verdict.verdict == "rejected" and "repetitions" not in verdict.reason
    assert evidence["dev_guard"]["repetitions"] == 1  # type: ignore[index]
    assert all(rep == 0 for _, rep, _ in fake.calls)


def test_a_first_pass_is_paired_by_repetition_even_when_the_parent_already_has_a_second(
    guarded: tuple[RunContext, FakeDev, Node, Node],
) -> None:
    ctx, fake, base, cand = guarded
    fake.parent_fails = (3, 0)  # the parent fails three dev tasks on the run's pass, none on its second
    second = split_seeds(ctx.cfg.seed, "dev", 2)[1]
    ctx.evaluator.evaluate(base, ctx.tasks["dev"], "dev", [second], first_repetition=1)  # an earlier child's guard
    verdict, evidence = _guard(ctx, base, cand)
    assert verdict == ACCEPTED and evidence["dev_guard"]["repetitions"] == 1  # type: ignore[index]
    assert evidence["dev_guard"]["confidence"] == better_confidence(3.0, 0.0)  # type: ignore[index]


def test_a_first_pass_already_clear_at_the_early_line_vetoes_without_a_second(
    guarded: tuple[RunContext, FakeDev, Node, Node],
) -> None:
    ctx, fake, base, cand = guarded
    fake.fails = (6, 0)  # six dev tasks lost, none won: P(better) 1/128, below (1 - 0.8)^2
    verdict, evidence = _guard(ctx, base, cand)
    assert verdict.verdict == "rejected" and "not kept: worse than its parent on dev" in verdict.reason
    assert "repetitions" not in verdict.reason
    clear = {"confidence": better_confidence(0.0, 6.0), "tasks": len(ctx.tasks["dev"]), "repetitions": 1}
    assert evidence["dev_guard"] == clear
    assert all(rep == 0 for _, rep, _ in fake.calls)


def test_the_early_line_is_the_veto_line_squared(guarded: tuple[RunContext, FakeDev, Node, Node]) -> None:
    ctx, fake, base, cand = guarded
    policies = ctx.cfg.policies.model_copy(update={"acceptance_confidence": 0.85})
    ctx.cfg = ctx.cfg.model_copy(update={"policies": policies})
    ctx.acceptance = replace(ctx.acceptance, confidence=0.85)
    fake.fails = (4, 4)  # P(better) 1/32 on the first pass: below (1 - 0.8)^2 = 0.04, above (1 - 0.85)^2 = 0.0225
    verdict, evidence = _guard(ctx, base, cand)
    assert verdict.verdict == "rejected" and evidence["dev_guard"]["repetitions"] == 2  # type: ignore[index]

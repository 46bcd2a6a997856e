"""A tie that train could not show goes to dev (`policies.unseen_tie_on_dev`, `saddler.run.unseen_tie`): which
decisions go (no win, no loss, no targeted failure among the parent's compared rollouts, the policy on, dev
evaluated at all), and on a real run folder and EvoDAG with a fake dev evaluator, what dev then decides."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fake_dev import FakeDev

from evodag.models import Node, RolloutRow
from saddler.config import PolicyConfig
from saddler.policies.acceptance import AcceptanceDecision
from saddler.run.context import RunContext
from saddler.run.loop import Optimizer
from saddler.run.unseen_tie import UNSEEN_MARK, decide_on_dev, goes_to_dev, train_saw_target

TIE = AcceptanceDecision("rejected", "not a strict improvement", 0.5, 0.5, confidence=0.5)


def _row(task: str, passed: bool) -> RolloutRow:
    return RolloutRow(
        id=1, run_id=1, node_id=1, task_id=task, split="train", seed=7, repetition=0, score=float(passed),
        passed=passed, disposition="success" if passed else "task_failure", cache_key=task,
    )  # fmt: skip


def _cand(targets: list[str]) -> Node:
    return Node(id=2, run_id=1, commit="c", parent_id=1, iteration=1, phase="capability", patch_kind="capability",
                origin="bank:x", status="pending", hypothesis={"target_tasks": targets})  # fmt: skip


def test_the_default_sends_a_tie_train_could_not_show_to_dev() -> None:
    assert PolicyConfig().unseen_tie_on_dev is True


@pytest.mark.parametrize(
    ("targets", "rows", "seen"),
    [
        ([], [_row("a", False)], False),  # an exploration hypothesis names no target
        (["a"], [_row("a", True), _row("b", False)], False),  # its target passed: nothing to fix there
        (["c"], [_row("a", False)], False),  # its target was not compared
        (["a"], [_row("a", False)], True),  # its target failed: the tie is evidence against the change
    ],
)
def test_train_saw_the_target_only_where_the_parent_failed_a_targeted_task(
    targets: list[str], rows: list[RolloutRow], seen: bool
) -> None:
    assert train_saw_target(_cand(targets), rows) is seen


@pytest.mark.parametrize(
    ("verdict", "policies", "targets", "goes"),
    [
        (TIE, PolicyConfig(), [], True),
        (TIE, PolicyConfig(), ["a"], False),  # the targeted failure was there and did not move
        (AcceptanceDecision("rejected", "worse", 0.5, 0.4, confidence=0.2, losses=1.0), PolicyConfig(), [], False),
        (AcceptanceDecision("rejected", "flip", 0.5, 0.5, confidence=0.5, wins=1.0, losses=1.0), PolicyConfig(), [],
         False),  # a win and a loss is not "nothing moved"
        (AcceptanceDecision("accepted", "better", 0.5, 0.6, confidence=0.9, wins=1.0), PolicyConfig(), [], False),
        (TIE, PolicyConfig(unseen_tie_on_dev=False), [], False),
        (TIE, PolicyConfig(dev_eval="never"), [], False),
    ],
)  # fmt: skip
def test_which_decisions_go_to_dev(
    verdict: AcceptanceDecision, policies: PolicyConfig, targets: list[str], goes: bool
) -> None:
    assert goes_to_dev(policies, _cand(targets), verdict, [_row("a", False)]) is goes


def _on_dev(
    tmp_path: Path, open_run_context: Callable[..., RunContext], fails: int, parent_fails: int
) -> tuple[AcceptanceDecision, dict[str, object]]:
    """A tie decided on dev, where the candidate fails `fails` dev tasks and the parent `parent_fails` others."""
    ctx = open_run_context(tmp_path / "run", "opsdesk", FakeDev)
    fake: FakeDev = ctx.evaluator  # type: ignore[assignment]
    base = Optimizer._baseline_node(ctx)
    cand = ctx.store.add_node(ctx.run_id, base.commit, base.id, 1, "capability", "capability", "patch")
    fake.cand, fake.fails, fake.parent_fails = cand.id, (fails,), (parent_fails,)
    it = ctx.store.start_iteration(ctx.run_id, 1, 0, ["t1"], parent_id=base.id)
    ctx.store.update_iteration(it.id, evidence={"verdict": "rejected"})  # the decision's own, kept
    base, cand = ctx.eval_dev(base), ctx.eval_dev(cand)
    verdict = decide_on_dev(ctx, it, base, cand, TIE)
    return verdict, ctx.store.get_iteration(it.id).evidence or {}


def test_a_tie_better_on_dev_is_accepted_with_its_dev_aggregates(
    tmp_path: Path, open_run_context: Callable[..., RunContext]
) -> None:
    verdict, evidence = _on_dev(tmp_path, open_run_context, fails=0, parent_fails=5)  # 5 dev wins, no loss
    assert verdict.verdict == "accepted"
    assert verdict.reason == (
        f"not a strict improvement; accepted: {UNSEEN_MARK} (no targeted failure among the tasks compared), better "
        "on dev (0.875 -> 1.000, P(better) 0.98 over 40 dev task(s))"
    )
    assert evidence == {"verdict": "rejected", "unseen_tie": {"confidence": 0.984375, "tasks": 40, "kept": True}}


@pytest.mark.parametrize(
    ("fails", "parent_fails", "confidence"),
    [(0, 0, 0.5), (3, 0, 0.0625), (0, 1, 0.75)],  # level (a placebo), worse, better but not clearly (one task)
)
def test_a_tie_not_clearly_better_on_dev_stays_rejected(
    tmp_path: Path, open_run_context: Callable[..., RunContext], fails: int, parent_fails: int, confidence: float
) -> None:
    verdict, evidence = _on_dev(tmp_path, open_run_context, fails, parent_fails)
    assert verdict == TIE
    assert evidence == {"verdict": "rejected", "unseen_tie": {"confidence": confidence, "tasks": 40, "kept": False}}

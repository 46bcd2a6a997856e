"""A tie whose targeted failures now fail elsewhere is kept as a stepping stone (`policies.keep_stepping_stones`);
a placebo's tie, a tie on untargeted tasks, a tie with a flip each way and a tie on a stepping stone are not."""

from __future__ import annotations

from evodag.models import Node, RolloutRow
from saddler.policies.acceptance import AcceptanceDecision
from saddler.run.stepping_stone import STONE_MARK, Movement, is_stone, keep_moved_tie, targeted_movement


def _row(task: str, passed: bool, file: str | None = None, rep: int = 0, check: str = "f2p") -> RolloutRow:
    return RolloutRow(
        id=0, run_id=1, node_id=1, task_id=task, split="train", seed=rep, repetition=rep, score=float(passed),
        passed=passed, disposition="success" if passed else "task_failure",
        rationale="" if passed else f"{check}: failed", failure_file=file,
    )  # fmt: skip


def _node(status: str = "accepted", reason: str = "", targets: tuple[str, ...] = ("a", "b")) -> Node:
    hypothesis = {"target_tasks": list(targets)}
    return Node(1, 1, "c" * 40, None, 1, "capability", "capability", "bank:x", status, reason, hypothesis=hypothesis)


TIE = AcceptanceDecision("rejected", "batch 0.25 -> 0.25: not a strict improvement", 0.25, 0.25, confidence=0.5)
BEFORE = [_row("a", False, "tools/files.py"), _row("b", False, "tools/files.py"), _row("c", True)]


def test_targeted_failures_that_fail_elsewhere_count_as_moved_and_the_same_signature_as_stuck() -> None:
    after = [_row("a", False, "tools/edit.py"), _row("b", False, "tools/files.py"), _row("c", True)]
    assert targeted_movement(["a", "b"], BEFORE, after) == Movement(
        1, 1, "tools/files.py :: f2p -> tools/edit.py :: f2p"
    )
    other_check = [_row("a", False, "tools/files.py", check="p2p"), _row("b", False, "tools/files.py")]
    assert targeted_movement(["a", "b"], BEFORE, other_check).moved == 1  # another failed check is another failure
    assert targeted_movement(["c"], BEFORE, after).moved == 0  # untargeted, and passing on both sides
    two_reps = [_row("a", False, "tools/files.py", rep=1), _row("a", False, "tools/edit.py", rep=1)]
    assert targeted_movement(["a"], two_reps[:1], two_reps[1:]).moved == 1  # paired by task and repetition


def test_a_tie_that_moved_most_targeted_failures_is_kept_neutral_with_the_change_in_its_reason() -> None:
    after = [_row("a", False, "tools/edit.py"), _row("b", False, "loop.py"), _row("c", True)]
    verdict, movement = keep_moved_tie(True, _node(), _node(), TIE, BEFORE, after)
    assert movement is not None and (movement.moved, movement.stuck) == (2, 0)
    assert verdict.verdict == "neutral"
    assert verdict.reason == (
        "batch 0.25 -> 0.25: not a strict improvement; kept as a stepping stone: the failure it targets moved on 2 "
        "of 2 targeted rollout(s) (tools/files.py :: f2p -> loop.py :: f2p)"
    )
    assert is_stone(_node("neutral", verdict.reason))
    assert not is_stone(_node("neutral", "neutral, kept by approval"))


def test_what_is_not_a_stepping_stone() -> None:
    moved = [_row("a", False, "tools/edit.py"), _row("b", False, "loop.py"), _row("c", True)]
    placebo = list(BEFORE)
    half = [_row("a", False, "tools/edit.py"), _row("b", False, "tools/files.py"), _row("c", True)]
    assert keep_moved_tie(True, _node(), _node(), TIE, BEFORE, placebo)[0] is TIE  # nothing moved
    assert keep_moved_tie(True, _node(), _node(), TIE, BEFORE, half)[0] is TIE  # as many stuck as moved
    assert keep_moved_tie(True, _node(), _node(targets=("c",)), TIE, BEFORE, moved)[0] is TIE  # not its targets
    assert keep_moved_tie(False, _node(), _node(), TIE, BEFORE, moved) == (TIE, None)  # the policy is off
    stone = _node("neutral", f"tie; {STONE_MARK}: ...")
    assert keep_moved_tie(True, stone, _node(), TIE, BEFORE, moved) == (TIE, None)  # one step, never a walk
    flips = AcceptanceDecision("rejected", "a flip each way", 0.5, 0.5, confidence=0.5, wins=1.0, losses=1.0)
    assert keep_moved_tie(True, _node(), _node(), flips, BEFORE, moved) == (flips, None)  # a task moved: no tie
    accepted = AcceptanceDecision("accepted", "better", 0.2, 0.5, confidence=0.9, wins=2.0)
    assert keep_moved_tie(True, _node(), _node(), accepted, BEFORE, moved) == (accepted, None)

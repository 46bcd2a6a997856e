"""Dev races: a dev evaluation is decided once the rest cannot change what it decides, and not before."""

from __future__ import annotations

from evodag.models import RolloutRow
from saddler.benchmark import Task
from saddler.policies.acceptance import task_outcomes
from saddler.run.dev_race import DevRace, race_order


def row(task: str, passed: bool, rep: int = 0, disposition: str = "") -> RolloutRow:
    return RolloutRow(
        id=0, run_id=1, node_id=2, task_id=task, split="dev", seed=rep, repetition=rep, score=float(passed),
        passed=passed, disposition=disposition or ("success" if passed else "task_failure"),
    )  # fmt: skip


def test_a_node_that_cannot_reach_the_best_is_decided_as_soon_as_that_is_certain() -> None:
    race = DevRace("pass_rate", tasks=10, repetitions=1, best=lambda: 0.8)
    two_failed = [row("t0", False), row("t1", False)]
    assert race.decided(two_failed) == ""  # 8 of 10 is still reachable: it could tie the best
    three = [*two_failed, row("t2", False)]
    assert race.decided(three).startswith("cannot reach the best node's dev 0.800 (at most 0.700")
    assert race.ceiling(three) == 0.7


def test_infra_errors_count_nowhere_in_the_ceiling() -> None:
    race = DevRace("pass_rate", tasks=4, repetitions=1, best=lambda: 0.9)
    rows = [row("t0", True), row("t1", False, disposition="infra_error")]
    assert race.ceiling(rows) == 1.0  # the infra error is out of the mean: 1 of 1 so far, 2 more that may pass


def test_a_complete_evaluation_or_nothing_to_beat_is_never_cut() -> None:
    race = DevRace("pass_rate", tasks=2, repetitions=1, best=lambda: None)
    assert race.decided([row("t0", False)]) == ""
    full = DevRace("pass_rate", tasks=2, repetitions=1, best=lambda: 1.0)
    assert full.decided([row("t0", False), row("t1", False)]) == ""


def test_the_guard_decides_only_when_even_winning_every_rest_stays_clearly_worse() -> None:
    parent = task_outcomes([row(f"t{i}", True) for i in range(6)] + [row("t6", False)])
    race = DevRace("pass_rate", tasks=7, repetitions=1, best=lambda: None, parent=parent, clear=0.04)
    losses = [row(f"t{i}", False) for i in range(6)]
    assert race.decided(losses[:5]) == ""  # 5 losses and t6 may still be a win: P(better) 0.0625, above 0.04
    assert race.decided(losses).startswith("clearly worse than its parent on dev whatever the rest show")
    assert race.best_case_against_parent(losses) == 0.03515625  # 6 losses, 1 win at best: Beta(2, 7)


def test_the_race_order_is_one_seeded_order_of_the_dev_split() -> None:
    tasks = [Task(f"d{i}", "g", "dev") for i in range(8)]
    assert [t.id for t in race_order(tasks, 3)] == [t.id for t in race_order(list(reversed(tasks)), 3)]
    assert sorted(t.id for t in race_order(tasks, 3)) == [t.id for t in tasks]
    assert [t.id for t in race_order(tasks, 3)] != [t.id for t in race_order(tasks, 4)]

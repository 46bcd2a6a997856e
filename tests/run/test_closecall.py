"""Close calls get evidence: the rounds a close call plans, and what every decision stores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evodag.history import compared_tasks
from evodag.store import EvoDAG
from saddler.run.closecall import MAX_ROUNDS, Round, plan_rounds
from saddler.run.loop import Optimizer

TRAIN = [f"t{i:02d}" for i in range(20)]


def test_a_round_takes_half_where_a_fix_should_show_and_half_where_a_regression_would() -> None:
    known = {"t02": "tools/a.py :: answer", "t03": "tools/a.py :: answer", "t04": "loop.py :: turns"}
    known |= {f"t{i:02d}": None for i in range(5, 12)}  # known passes
    rounds = plan_rounds(["t00", "t01"], {"tools/a.py :: answer"}, known, TRAIN, 1, 8, "s")
    assert len(rounds) == 2 and all(r.repetition is None and len(r.tasks) == 2 for r in rounds)
    first, second = rounds[0].tasks, rounds[1].tasks
    assert first[0] in ("t02", "t03") and first[1] in {f"t{i:02d}" for i in range(5, 12)}
    assert second[0] in ("t02", "t03") and second[0] != first[0]  # same signature before other failures
    assert not set(first) & set(second) and not {"t00", "t01"} & set(first + second)


def test_rounds_stop_at_the_cap_and_repeat_seeds_once_train_is_spent() -> None:
    assert len(plan_rounds(["t00", "t01"], set(), {}, TRAIN, 1, 7, "s")) == 1  # one round costs 2 x 2 = 4
    assert plan_rounds(["t00", "t01"], set(), {}, TRAIN, 2, 7, "s") == []  # one round costs 2 x 2 x 2 = 8
    small = ["a", "b", "c"]
    rounds = plan_rounds(["a", "b"], set(), {"c": None}, small, 1, 20, "s")
    assert rounds[0] == Round(("c",))
    assert [r.repetition for r in rounds[1:]] == [1, 1, 2, 2, 3, 3]
    assert rounds[1].tasks == ("a", "b") and rounds[2].tasks == ("c",)
    assert sum(r.cost(1) for r in rounds) == 20
    assert len(plan_rounds(["a"], set(), {}, ["a"], 1, 10**6, "s")) == MAX_ROUNDS


def test_a_plan_is_a_pure_function_of_its_inputs() -> None:
    args = (["t00"], set(), {"t01": None, "t02": "x :: y"}, TRAIN, 1, 24, "7:3")
    assert plan_rounds(*args) == plan_rounds(*args)
    assert plan_rounds(*args) != plan_rounds(*args[:-1], "7:4")


@pytest.mark.slow
def test_every_decision_stores_its_evidence_and_close_calls_gather_more_tasks(
    tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    run = make_run(tmp_path / "run", loop={"max_iterations": 8})
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        decided = [it for it in store.iterations() if it.decision in ("accepted", "rejected")]
        rows = {(r.node_id, r.task_id) for r in store.rollouts(split="train")}
        first = {it.number: it for it in decided}
    assert decided
    for it in decided:
        ev = it.evidence or {}
        assert ev["rule"] == "sequential" and 0.0 <= ev["confidence"] <= 1.0
        assert set(ev) >= {"verdict", "wins", "losses", "tasks", "rounds_run", "rollouts", "stopped"}
        tasks = compared_tasks(it.batch, ev)
        assert ev["tasks"] == len(tasks)
        for task in tasks:  # parent and candidate both ran every task compared
            assert (it.parent_id, task) in rows and (it.candidate_id, task) in rows
    close = [it for it in decided if (it.evidence or {}).get("rounds_run")]
    assert close, "a run on opsdesk has close calls"
    assert all(it.evidence and it.evidence["rollouts"] > 0 for it in close)
    assert all((first[it.number].evidence or {}).get("plan") for it in close)

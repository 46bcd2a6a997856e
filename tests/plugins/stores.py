"""Fixtures for the evodag tests: a small, fully deterministic EvoDAG built through the store API (`fixture_dag`)
and a deterministic clock (`counting_clock`).

Shape (node ids in creation order; `dev` = dev_mean):

    1 baseline dev .50 ──patch──> 2 accepted dev .60 ──patch──> 3 rejected
      │                             └──patch──> 4 accepted dev .70 (20 lines) ──revert(of 2->4)──> 7 invalid
      ├──rebase──> 5 neutral dev .55 ──cherry_pick(of 2->4)──> 6 accepted dev .70 (15 lines)  <- best (tie, fewer lines)
      └──patch──> 8 pending   (current iteration 5: parent 1, candidate 8)

Branches (root-to-leaf): 1-2-3, 1-2-4-7, 1-5-6, 1-8. Frontier: 6, 8.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from evodag.store import EvoDAG

BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)
TRAIN = ("t-a", "t-b", "t-c")
DEV = ("d-1", "d-2")


def _counting_clock(start: datetime = BASE_TIME) -> Callable[[], str]:
    state = {"n": 0}

    def clock() -> str:
        state["n"] += 1
        return (start + timedelta(seconds=state["n"])).isoformat(timespec="milliseconds")

    return clock


# node id -> (train outcomes {task: [passed per repetition]}, dev passes {task: passed})
TRAIN_OUTCOMES: dict[int, dict[str, list[bool]]] = {
    1: {"t-a": [True], "t-b": [False], "t-c": [False]},
    2: {"t-a": [True], "t-b": [True], "t-c": [False]},
    3: {"t-a": [False], "t-b": [True], "t-c": [False]},
    4: {"t-a": [True], "t-b": [True], "t-c": [True]},
    5: {"t-a": [True], "t-b": [False], "t-c": [False]},
    6: {"t-a": [True], "t-b": [True], "t-c": [True]},
    8: {"t-a": [True], "t-b": [True], "t-c": [True, False]},
}
DEV_OUTCOMES: dict[int, dict[str, bool]] = {
    1: {"d-1": True, "d-2": False},
    2: {"d-1": True, "d-2": True},
    4: {"d-1": True, "d-2": True},
    5: {"d-1": False, "d-2": True},
    6: {"d-1": True, "d-2": True},
}


def _rollouts(store: EvoDAG, run_id: int) -> None:
    for node_id, tasks in TRAIN_OUTCOMES.items():
        for task, reps in tasks.items():
            for rep, passed in enumerate(reps):
                store.add_rollout(
                    run_id=run_id, node_id=node_id, task_id=task, split="train", seed=100 + rep, repetition=rep,
                    score=1.0 if passed else 0.0, passed=passed,
                    disposition="success" if passed else "task_failure", cost=0.01, llm_calls=3, duration_s=2.0,
                    rationale="" if passed else f"{task} answer wrong",
                    failure_file=None if passed else "prompts/system.md", task_group=task[-1],
                    cache_key=f"{node_id}:{task}:{rep}",
                )  # fmt: skip
    for node_id, dev in DEV_OUTCOMES.items():
        for task, passed in dev.items():
            store.add_rollout(
                run_id=run_id, node_id=node_id, task_id=task, split="dev", seed=7, repetition=0,
                score=1.0 if passed else 0.0, passed=passed, disposition="success" if passed else "task_failure",
                cost=0.02, task_group="dev", cache_key=f"{node_id}:{task}:dev",
            )  # fmt: skip


def _build_fixture(path: Path) -> dict[str, int]:
    with EvoDAG(path, clock=_counting_clock()) as s:
        run = s.create_run({"benchmark": "opsdesk", "budget": 10}, seed=7).id
        add = s.add_node
        n1 = add(run, "c1" * 20, None, 0, "baseline", "baseline", "baseline", status="baseline").id
        n2 = add(run, "c2" * 20, n1, 1, "capability", "capability", "patch", hypothesis={"claim": "retry tool"},
                 lines_changed=10).id  # fmt: skip
        n3 = add(run, "c3" * 20, n2, 2, "capability", "capability", "patch", lines_changed=14).id
        n4 = add(run, "c4" * 20, n2, 3, "capability", "capability", "patch", lines_changed=20).id
        n5 = add(run, "c5" * 20, n1, 4, "capability", "rebase", "rebase", lines_changed=4).id
        n6 = add(run, "c6" * 20, n5, 4, "capability", "cherry_pick", "cherry_pick", lines_changed=15).id
        n7 = add(run, "c7" * 20, n4, 4, "steering", "revert", "revert", lines_changed=10).id
        n8 = add(run, "c8" * 20, n1, 5, "steering", "steering", "patch", lines_changed=3).id
        e12 = s.add_edge(run, n1, n2, "patch", "--- a/tools.py\n+++ b/tools.py\n+retry = 3\n", ["tools.py"], 1, 0).id
        e23 = s.add_edge(run, n2, n3, "patch", "--- a/loop.py\n+++ b/loop.py\n-x\n+y\n", ["loop.py"], 1, 1).id
        e24 = s.add_edge(run, n2, n4, "patch", "--- a/tools.py\n+++ b/tools.py\n+cache = True\n", ["tools.py"], 1, 0).id
        e15 = s.add_edge(run, n1, n5, "rebase", "--- a/loop.py\n+++ b/loop.py\n+max_turns = 9\n", ["loop.py"], 1, 0).id
        e56 = s.add_edge(run, n5, n6, "cherry_pick", "--- a/tools.py\n+++ b/tools.py\n+cache = True\n", ["tools.py"],
                         1, 0, source_edge_id=e24).id  # fmt: skip
        e47 = s.add_edge(run, n4, n7, "revert", "--- a/tools.py\n+++ b/tools.py\n-cache = True\n", ["tools.py"], 0, 1,
                         source_edge_id=e24).id  # fmt: skip
        e18 = s.add_edge(run, n1, n8, "patch", "--- a/prompts/system.md\n+++ b/prompts/system.md\n+Be brief.\n",
                         ["prompts/system.md"], 1, 0).id  # fmt: skip
        s.set_edge_transitions(e12, fixed=["t-b"], regressed=[], still_failing=["t-c"], still_passing=["t-a"])
        s.set_edge_transitions(e23, fixed=[], regressed=["t-a"], still_failing=["t-c"], still_passing=["t-b"])
        s.set_edge_transitions(e24, fixed=["t-c"], regressed=[], still_failing=[], still_passing=["t-a", "t-b"])
        s.set_edge_transitions(e56, fixed=["t-b", "t-c"], regressed=[], still_failing=[], still_passing=["t-a"])
        scores = {n1: (0.5, 0.1), n2: (0.6, 0.05), n4: (0.7, 0.0), n5: (0.55, 0.05), n6: (0.7, 0.02)}
        for node_id, (mean, std) in scores.items():
            s.update_node(node_id, dev_mean=mean, dev_std=std)
        s.update_node(n2, status="accepted", batch_before=0.33, batch_after=0.67)
        s.update_node(n3, status="rejected", status_reason="batch 0.33 <= 0.67", batch_before=0.67, batch_after=0.33)
        s.update_node(n4, status="accepted", batch_before=0.67, batch_after=1.0)
        s.update_node(n5, status="neutral")
        s.update_node(n6, status="accepted")
        s.update_node(n7, status="invalid", status_reason="protected path touched")
        s.update_run(run, baseline_node_id=n1, best_node_id=n6)  # what the loop's ranking policy records
        _rollouts(s, run)
        s.add_lesson(run, "fixed", "true_fix", "retrying the lookup tool fixes t-b", edge_id=e12, iteration=1,
                     task_id="t-b")  # fmt: skip
        s.add_lesson(run, "regressed", "true_regression", "loop rewrite broke t-a", edge_id=e23, node_id=n3,
                     iteration=2, task_id="t-a")  # fmt: skip
        s.add_lesson(run, "still_failing", "uncertain", "t-c needs the cache", edge_id=e12, iteration=1, task_id="t-c")
        s.add_lesson(run, "fixed", "stochastic", "t-b flips with the seed", edge_id=e56, node_id=n6, iteration=4,
                     task_id="t-b")  # fmt: skip
        s.add_lesson(run, "general", "uncertain", "caching helps group c", node_id=n4, iteration=3)
        for number, (parent, cand, decision) in enumerate(
            [(n1, n2, "accepted"), (n2, n3, "rejected"), (n2, n4, "accepted"), (n1, n6, "accepted")], start=1
        ):
            it = s.start_iteration(
                run, number, 0 if number < 3 else 1, list(TRAIN), parent_id=parent, phase="capability"
            )
            s.add_session(run, "diagnosis_patch", "offline", iteration=number, node_id=cand, cost_usd=0.25, turns=4)
            s.update_iteration(it.id, candidate_id=cand, step="done", decision=decision)
        it5 = s.start_iteration(run, 5, 2, list(TRAIN), parent_id=n1, phase="steering", stall_count=1)
        s.update_iteration(it5.id, candidate_id=n8, step="candidate_evaluated")
        ids = {"run": run, "e12": e12, "e23": e23, "e24": e24, "e15": e15, "e56": e56, "e47": e47, "e18": e18}
        return ids | {f"n{i}": i for i in range(1, 9)}


@pytest.fixture(scope="session")
def counting_clock() -> Callable[..., Callable[[], str]]:
    """`counting_clock(start=2026-01-01)`: a clock that advances one second per call (same calls => same
    timestamps)."""
    return _counting_clock


@pytest.fixture(scope="session")
def fixture_dag() -> Callable[[Path], dict[str, int]]:
    """`fixture_dag(path)`: create the DAG drawn in this module's docstring at `path`; returns names -> ids
    (`run`, nodes `n1`..`n8`, edges `e12`, `e23`, ...)."""
    return _build_fixture

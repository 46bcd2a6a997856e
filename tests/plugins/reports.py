"""Fixtures for the report/plot/export/status tests: a realistic finished run written through the real EvoDAG
API (`open_store`, then `build_run`).

Train tr-1..tr-8 (groups g-a, g-b), dev dv-1..dv-4, test te-1..te-4 (g-t1, g-t2). One repetition per train
and dev rollout (seed 1000 / 2000, the same for every node, so re-evaluations are cache hits), k=3 test
runs (seeds 3000..3002). Nodes (N1 is the baseline):

  it  parent  candidate                                                   batch      dev    status
  1   N1      N2 capability/tool  bank:paginate_tools                    1/3->2/3   0.75   accepted
  2   N2      N3 capability/loop  bank:retry_transient                   1/3->1/3   —      rejected
  3   N2      N4 capability/infra patch (touches saddler.toml)           —          —      invalid
  4   N2      N5 steering/prompt  patch                                  1/3->3/3   0.50   accepted
  5   N5      N6 steering/reminder bank:verify_reminder                  1/3->2/3   0.75   accepted
  6   N7      N8 steering/hook    bank:confirm_hook                      2/3->1/3   —      rejected
      (evolution: N7 = N6's change rebased onto N2, dev 1.00, accepted)
  7   N7      no patch (evolution: N9 = cherry-pick of N2->N3 onto N7, dev 0.75, rejected)
  8   N7      N10 steering/prompt patch                                  1/3->1/3   —      neutral

Best = N7 (dev 1.0); test Pass@1 baseline 0.5 ± 0.2041, best 0.9167 ± 0.1179. Every figure the tests
assert is derived by hand from the tables below.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from evodag.store import EvoDAG
from saddler.policies.ranking import pick_best

P, F = True, False
START, FINISH = "2026-03-01T10:00:00+00:00", "2026-03-01T11:02:03+00:00"
CONFIG: dict[str, Any] = {
    "name": "fixture-run", "benchmark": "opsdesk", "seed": 7,
    "loop": {"test_runs": 3, "max_iterations": 8, "stall_limit": 4, "batch_size": 3},
}  # fmt: skip
GROUPS = {
    **{f"tr-{i}": "g-a" if i <= 4 else "g-b" for i in range(1, 9)},
    **{f"dv-{i}": "g-dev" for i in range(1, 5)},
    "te-1": "g-t1",
    "te-2": "g-t1",
    "te-3": "g-t2",
    "te-4": "g-t2",
}
TRAIN = {  # node -> task -> passed (a node's outcome on a task is fixed: re-evaluation is a cache hit)
    "N1": {"tr-1": P, "tr-2": F, "tr-3": F},
    "N2": {"tr-1": P, "tr-2": P, "tr-3": F, "tr-4": P, "tr-5": F, "tr-6": F, "tr-7": F, "tr-8": F},
    "N3": {"tr-4": F, "tr-5": P, "tr-6": F},
    "N5": {"tr-2": P, "tr-5": P, "tr-7": P, "tr-3": F, "tr-6": F, "tr-8": P},
    "N6": {"tr-3": P, "tr-6": F, "tr-8": P},
    "N7": {"tr-1": P, "tr-4": P, "tr-6": F, "tr-5": P, "tr-7": P, "tr-2": P, "tr-3": P, "tr-8": F},
    "N8": {"tr-1": P, "tr-4": F, "tr-6": F},
    "N10": {"tr-3": P, "tr-6": F, "tr-8": F},
}
DEV = {
    "N1": [P, P, F, F],
    "N2": [P, P, P, F],
    "N5": [P, F, P, F],
    "N6": [P, P, F, P],
    "N7": [P, P, P, P],
    "N9": [P, P, P, F],
}
TEST = {  # node -> repetition -> [te-1, te-2, te-3, te-4]
    "N1": [[P, F, F, P], [P, F, F, F], [P, F, P, P]],
    "N7": [[P, P, P, P], [P, P, F, P], [P, P, P, P]],
}
HYP = {
    "N2": ("capability", "tool", "bank:paginate_tools", "Add pagination to list_tickets so long queues are read fully"),
    "N3": ("capability", "loop", "bank:retry_transient", "Retry transient tool errors in the agent loop"),
    "N4": ("capability", "infra", "patch", "Raise the tool timeout in saddler.toml"),
    "N5": ("steering", "prompt", "patch", "Tell the agent to confirm the ticket id before closing it"),
    "N6": ("steering", "reminder", "bank:verify_reminder", "Remind the agent to verify the final state"),
    "N8": ("steering", "hook", "bank:confirm_hook", "Add a hook that forces | a confirmation\tbefore every\nsend"),
    "N10": ("steering", "prompt", "patch", "Shorten the system prompt's escalation section"),
}
LINES = {"N1": 0, "N2": 14, "N3": 20, "N4": 2, "N5": 17, "N6": 20, "N7": 20, "N8": 40, "N9": 34, "N10": 25}
# (iteration, epoch, phase, batch, evolution node, parent, candidate, decision, stall_count after, reason)
ITERATIONS = [
    (1, 0, "capability", ["tr-1", "tr-2", "tr-3"], None, "N1", "N2", "accepted", 0, "batch 0.33 -> 0.67"),
    (
        2,
        0,
        "capability",
        ["tr-4", "tr-5", "tr-6"],
        None,
        "N2",
        "N3",
        "rejected",
        1,
        "batch 0.33 -> 0.33: not a strict improvement",
    ),
    (
        3,
        0,
        "capability",
        ["tr-7", "tr-8", "tr-1"],
        None,
        "N2",
        "N4",
        "invalid",
        2,
        "protected path touched: saddler.toml",
    ),
    (4, 1, "steering", ["tr-2", "tr-5", "tr-7"], None, "N2", "N5", "accepted", 0, "batch 0.33 -> 1.00"),
    (5, 1, "steering", ["tr-3", "tr-6", "tr-8"], None, "N5", "N6", "accepted", 0, "batch 0.33 -> 0.67"),
    (
        6,
        1,
        "steering",
        ["tr-1", "tr-4", "tr-6"],
        "N7",
        "N7",
        "N8",
        "rejected",
        1,
        "batch 0.67 -> 0.33: not a strict improvement",
    ),
    (7, 2, "steering", ["tr-5", "tr-7", "tr-2"], "N9", "N7", None, "no_patch", 2, ""),
    (
        8,
        2,
        "steering",
        ["tr-3", "tr-6", "tr-8"],
        None,
        "N7",
        "N10",
        "neutral",
        0,
        "batch 0.33 -> 0.33: equal, no task regression",
    ),
]
EDGES = {  # child -> (parent, kind, files, source child, fixed, regressed, still_failing, still_passing)
    "N2": ("N1", "patch", ["tools/tickets.py"], None, ["tr-2"], [], ["tr-3"], ["tr-1"]),
    "N3": ("N2", "patch", ["agent/loop.py"], None, ["tr-5"], ["tr-4"], ["tr-6"], []),
    "N4": ("N2", "patch", ["saddler.toml"], None, [], [], [], []),
    "N5": ("N2", "patch", ["prompts/system.md"], None, ["tr-5", "tr-7"], [], [], ["tr-2"]),
    "N6": ("N5", "patch", ["prompts/reminders.md"], None, ["tr-3"], [], ["tr-6"], ["tr-8"]),
    "N7": ("N2", "rebase", ["prompts/reminders.md"], "N6", [], [], [], []),
    "N8": ("N7", "patch", ["hooks/confirm.py"], None, [], ["tr-4"], ["tr-6"], ["tr-1"]),
    "N9": ("N7", "cherry_pick", ["agent/loop.py"], "N3", [], [], [], []),
    "N10": ("N7", "patch", ["prompts/system.md"], None, [], [], ["tr-6", "tr-8"], ["tr-3"]),
}
NO_PATCH_REASON = "every batch task passes: nothing to diagnose"
SESSIONS = {"diagnosis_patch": (6, 1000, 200, 0.05), "reflection": (2, 400, 100, 0.02), "evolution": (3, 300, 50, 0.01)}


def fake_commit(label: str) -> str:
    return hashlib.sha1(label.encode()).hexdigest()


@dataclass
class Fixture:
    """Node ids by label, the run id and the commits used; the run's fixed times and texts."""

    run_id: int
    ids: dict[str, int] = field(default_factory=dict)
    commits: dict[str, str] = field(default_factory=dict)
    started: str = START
    finished: str = FINISH
    no_patch_reason: str = NO_PATCH_REASON

    @staticmethod
    def fake_commit(label: str) -> str:
        """The commit sha a label's node gets (unless `build_run(commits=...)` gave one): sha1 of the label."""
        return fake_commit(label)


class _Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> str:
        return self.now


def _rollout(store: EvoDAG, fx: Fixture, label: str, task: str, split: str, seed: int, rep: int, passed: bool) -> None:
    node = fx.ids[label]
    store.add_rollout(
        run_id=fx.run_id, node_id=node, task_id=task, split=split, seed=seed, repetition=rep,
        score=1.0 if passed else 0.0, passed=passed, disposition="success" if passed else "task_failure",
        cost=0.01, trace_path=f"traces/n{node}/{split}/{task}-s{seed}-r{rep}.json", task_group=GROUPS[task],
        cache_key=f"{node}:{split}:{task}:{seed}:{rep}",
    )  # fmt: skip


def _evaluate_train(store: EvoDAG, fx: Fixture, label: str, batch: list[str]) -> float:
    for task in batch:
        _rollout(store, fx, label, task, "train", 1000, 0, TRAIN[label][task])
    return sum(TRAIN[label][t] for t in batch) / len(batch)


def _evaluate_dev(store: EvoDAG, fx: Fixture, label: str) -> None:
    for i, passed in enumerate(DEV[label], start=1):
        _rollout(store, fx, label, f"dv-{i}", "dev", 2000, 0, passed)
    store.update_node(fx.ids[label], dev_mean=sum(DEV[label]) / 4, dev_std=0.0)


def _add_node(store: EvoDAG, fx: Fixture, label: str, iteration: int, phase: str, status: str) -> None:
    parent, kind, files, source, fixed, regressed, failing, passing = EDGES[label]
    if label in HYP:
        patch_kind, subtype, origin, plan = HYP[label]
        hyp: dict[str, Any] = {
            "target_tasks": [],
            "diagnosis": f"diagnosis for {label}",
            "plan": plan,
            "patch_kind": patch_kind,
            "subtype": subtype,
            "files": files,
            "origin": origin,
        }
    else:
        patch_kind, origin = kind, "rebase" if kind == "rebase" else HYP[source or ""][2]
        hyp = {"evolution": f"{kind} of the change into {source} onto {parent}"}
    fx.commits.setdefault(label, fake_commit(label))
    node = store.add_node(
        fx.run_id,
        fx.commits[label],
        fx.ids[parent],
        iteration,
        phase,
        patch_kind,
        origin,
        status=status,
        hypothesis=hyp,
        lines_changed=LINES[label],
    )
    fx.ids[label] = node.id
    src_edge = store.edge_into(fx.ids[source]) if source else None
    src = src_edge.id if src_edge else None
    diff = f"--- a/{files[0]}\n+++ b/{files[0]}\n@@ -1 +1 @@\n-old {label}\n+new {label}\n"
    edge = store.add_edge(fx.run_id, fx.ids[parent], node.id, kind, diff, files, 1, 1, source_edge_id=src)
    if kind == "patch" and status != "invalid":
        store.set_edge_transitions(edge.id, fixed, regressed, failing, passing)
        for category, tasks in (("fixed", fixed), ("regressed", regressed)):
            for task in tasks:
                store.add_lesson(
                    fx.run_id,
                    category,
                    "true_fix" if category == "fixed" else "true_regression",
                    f"{label} {category} {task}",
                    node_id=node.id,
                    edge_id=edge.id,
                    iteration=iteration,
                    task_id=task,
                )


def _session(store: EvoDAG, fx: Fixture, role: str, iteration: int, outcome: str = "ok") -> None:
    turns, tin, tout, cost = SESSIONS[role]
    store.add_session(
        fx.run_id,
        role,
        "offline",
        iteration=iteration,
        turns=turns,
        tokens_in=tin,
        tokens_out=tout,
        cost_usd=cost,
        outcome=outcome,
    )


def _iteration(store: EvoDAG, fx: Fixture, spec: tuple[Any, ...]) -> None:
    number, epoch, phase, batch, evo, parent, cand, decision, stalls, reason = spec
    it = store.start_iteration(fx.run_id, number, epoch, batch, phase=phase, stall_count=stalls)
    if number > 1:
        _session(store, fx, "evolution", number)
    if evo:
        _add_node(store, fx, evo, number, phase, "pending")
        _evaluate_dev(store, fx, evo)
        status = "accepted" if evo == "N7" else "rejected"
        store.update_node(fx.ids[evo], status=status, status_reason=f"{EDGES[evo][1]}: dev vs base")
    store.update_iteration(it.id, parent_id=fx.ids[parent], step="evolved")
    before = _evaluate_train(store, fx, parent, batch)
    evidence = [f"traces/n{fx.ids[parent]}/train/{t}-s1000-r0.json" for t in batch]
    store.log_event("diagnosis.evidence", {"iteration": number, "trace_paths": evidence}, run_id=fx.run_id)
    _session(store, fx, "diagnosis_patch", number, "no_patch" if cand is None else "ok")
    if cand is None:
        store.log_event("diagnosis.no_patch", {"iteration": number, "reason": NO_PATCH_REASON}, run_id=fx.run_id)
    if cand is not None:
        _add_node(store, fx, cand, number, phase, "invalid" if decision == "invalid" else "pending")
        if decision != "invalid":  # an invalid candidate is never evaluated: no batch scores
            store.update_node(fx.ids[cand], batch_before=before)
            after = _evaluate_train(store, fx, cand, batch)
            store.update_node(fx.ids[cand], batch_after=after)
            if cand in DEV:
                _evaluate_dev(store, fx, cand)
            _session(store, fx, "reflection", number)
        store.update_node(fx.ids[cand], status=decision, status_reason=reason)
    store.update_iteration(
        it.id,
        candidate_id=fx.ids.get(cand or ""),
        decision=decision,
        stall_count=stalls,
        step="done",
        finished_at=START,
    )


def _record_best(store: EvoDAG, run_id: int) -> None:
    """What the loop does after each decision: record the ranking policy's pick when it changed."""
    best = pick_best(store.nodes(run_id))
    if best is not None and store.get_run(run_id).best_node_id != best.id:
        store.update_run(run_id, best_node_id=best.id)


def _build_run(
    store: EvoDAG, clock: _Clock, iterations: int = 8, finish: bool = True, commits: dict[str, str] | None = None
) -> Fixture:
    run = store.create_run(CONFIG, seed=7)
    fx = Fixture(run_id=run.id, commits=dict(commits or {}))
    fx.commits.setdefault("N1", fake_commit("N1"))
    base = store.add_node(run.id, fx.commits["N1"], None, 0, "baseline", "baseline", "baseline", status="baseline")
    fx.ids["N1"] = base.id
    store.update_run(run.id, baseline_node_id=base.id)
    _evaluate_dev(store, fx, "N1")
    _record_best(store, run.id)
    for spec in ITERATIONS[:iterations]:
        _iteration(store, fx, spec)
        _record_best(store, run.id)
    if finish:
        for label in ("N1", "N7"):
            for rep, outcomes in enumerate(TEST[label]):
                for i, passed in enumerate(outcomes, start=1):
                    _rollout(store, fx, label, f"te-{i}", "test", 3000 + rep, rep, passed)
        clock.now = FINISH
        store.update_run(
            run.id,
            status="finished",
            finished_at=FINISH,
            termination_reason="max_iterations",
            best_node_id=fx.ids["N7"],
        )
    return fx


def _open_store(path: Any) -> tuple[EvoDAG, _Clock]:
    clock = _Clock()
    return EvoDAG(path, clock=clock), clock


@pytest.fixture(scope="session")
def open_store() -> Callable[[Any], tuple[EvoDAG, _Clock]]:
    """`open_store(path)`: a fresh writable store at `path` on the fixture's fixed clock; returns (store, clock)."""
    return _open_store


@pytest.fixture(scope="session")
def build_run() -> Callable[..., Fixture]:
    """`build_run(store, clock, iterations=8, finish=True, commits=None)`: write the run of this module's docstring
    (its first `iterations` iterations; with `finish`, the test runs and the run's end); returns its `Fixture`."""
    return _build_run


def _graded_baseline(store: EvoDAG, config: dict[str, Any], inputs: dict[str, Any] | None, commit: str) -> Any:
    """A run of `config` (its recorded `inputs`, when given) whose baseline node `commit` has two graded test runs
    of two tasks: Pass@1 0.5 ± 0, mean score 0.6875 ± 0.0625. Returns the node."""
    run = store.create_run(config, seed=1)
    if inputs is not None:
        store.update_run(run.id, inputs=inputs)
    node = store.add_node(run.id, commit, None, 0, "baseline", "baseline", "baseline", status="baseline")
    store.update_run(run.id, baseline_node_id=node.id, best_node_id=node.id)
    graded = {0: {"te-1": 0.5, "te-2": 1.0}, 1: {"te-1": 0.25, "te-2": 1.0}}
    for rep, scores in graded.items():
        for task, score in scores.items():
            store.add_rollout(
                run_id=run.id, node_id=node.id, task_id=task, split="test", seed=3000 + rep, repetition=rep,
                score=score, passed=score == 1.0, disposition="success" if score == 1.0 else "task_failure",
                cost=0.0, trace_path="", task_group="g", cache_key=f"{task}:{rep}",
            )  # fmt: skip
    return node


@pytest.fixture(scope="session")
def graded_baseline() -> Callable[..., Any]:
    """`graded_baseline(store, config, inputs, commit)`: a run whose baseline has graded test rollouts that score
    differently under pass_rate (0.5 ± 0) and mean_score (0.6875 ± 0.0625); returns the baseline node."""
    return _graded_baseline

"""`evo-dag history` and the per-task registry of `evo-dag scenario` on a small run built through the store API:
exact JSON documents, the text form, `--last`, and the failure signature rule."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evodag.cli import app
from evodag.history import failure_signature, history
from evodag.queries import lineage_train_outcomes
from evodag.store import EvoDAG

runner = CliRunner()
FIX_PLAN = "retry the lookup tool on 503"
CACHE_PLAN = "cache lookups"


def _rollout(s: EvoDAG, run: int, node: int, task: str, passed: bool, rationale: str = "", ffile: str | None = None,
             rep: int = 0, split: str = "train") -> None:  # fmt: skip
    s.add_rollout(run_id=run, node_id=node, task_id=task, split=split, seed=10 + rep, repetition=rep,
                  score=1.0 if passed else 0.0, passed=passed, disposition="success" if passed else "task_failure",
                  rationale=rationale, failure_file=ffile, task_group=task[:1],
                  cache_key=f"{node}:{task}:{rep}:{split}")  # fmt: skip


EVIDENCE = {
    "plan": [{"tasks": ["b2", "b3"], "repetition": None}, {"tasks": ["a1", "a2"], "repetition": 1}],
    "first_rollout": 7, "rule": "sequential", "verdict": "accepted", "confidence": 0.875, "wins": 2.0,
    "losses": 0.0, "tasks": 5, "rounds_run": 1, "round_confidence": [0.875], "rollouts": 4,
    "stopped": "clear after 1 round(s)",
}  # fmt: skip
SCHEDULE_MOVE = {"iteration": 5, "from": "capability", "to": "steering", "scheduled": True,
                 "reason": "7 train tasks shown, capability_epochs 2 x 3 train tasks"}  # fmt: skip
EVIDENCE_MOVE = {"iteration": 3, "from": "capability", "to": "steering", "scheduled": False,
                 "reason": "every failure points at steering files"}  # fmt: skip
WIDENED_MOVE = {"iteration": 3, "from": "steering", "to": "mixed", "scheduled": False, "widened": True, "attempt": 1,
                "reason": "no steering patch answers the batch's failures: capability patches allowed too"}  # fmt: skip
EVIDENCE_SEEN = {"rule": "sequential", "confidence": 0.875, "wins": 2.0, "losses": 0.0, "tasks": 5,
                 "rounds": [["b2", "b3"]], "rollouts": 4, "stopped": "clear after 1 round(s)"}  # fmt: skip


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, counting_clock: Callable[..., Callable[[], str]]) -> Path:
    """Four iterations: 1 accepted (fixes a1), 2 rejected (regresses b1), 3 no_patch after an evolution
    rebase, 4 no_training_failures (nothing diagnosed); iteration 5 still running."""
    path = tmp_path_factory.mktemp("hist") / "evodag.sqlite"
    with EvoDAG(path, clock=counting_clock()) as s:
        run = s.create_run({}, seed=3).id
        n1 = s.add_node(run, "c1" * 20, None, 0, "baseline", "baseline", "baseline", status="baseline").id
        n2 = s.add_node(run, "c2" * 20, n1, 1, "capability", "capability", "bank:retry",
                        hypothesis={"plan": FIX_PLAN, "target_tasks": ["a1"]}, lines_changed=3).id  # fmt: skip
        n3 = s.add_node(run, "c3" * 20, n2, 2, "capability", "capability", "bank:cache",
                        hypothesis={"plan": CACHE_PLAN, "target_tasks": ["a2"]}, lines_changed=5).id  # fmt: skip
        s.update_node(n1, dev_mean=0.5)
        s.update_node(n2, status="accepted", status_reason="batch 0.333 -> 0.667 on 3 task(s): strict improvement",
                      batch_before=0.333333, batch_after=0.666667, dev_mean=0.6)  # fmt: skip
        s.update_node(n3, status="rejected", status_reason="batch 0.667 -> 0.333 on 3 task(s): worse",
                      batch_before=0.666667, batch_after=0.333333)  # fmt: skip
        e12 = s.add_edge(run, n1, n2, "patch", "--- a/tools/lookup.py\n", ["tools/lookup.py"], 2, 1).id
        e23 = s.add_edge(run, n2, n3, "patch", "--- a/loop.py\n", ["loop.py", "tools/lookup.py"], 4, 1).id
        s.set_edge_transitions(e12, fixed=["a1"], regressed=[], still_failing=["a2"], still_passing=["b1"])
        s.set_edge_transitions(e23, fixed=[], regressed=["b1"], still_failing=["a2"], still_passing=["a1"])
        for node, passes in ((n1, (False, False, True)), (n2, (True, False, True)), (n3, (True, False, False))):
            for task, ok in zip(("a1", "a2", "b1"), passes, strict=True):
                why = {"a1": "answer: answered 3, expected 4", "a2": "event_time: off by 5 h", "b1": "mail bounced"}
                ffile = {"a1": "tools/lookup.py", "a2": "tools/calendar.py", "b1": None}[task]
                _rollout(s, run, node, task, ok, "" if ok else why[task], None if ok else ffile)
        for task in ("b2", "b3"):
            _rollout(s, run, n2, task, True)
        _rollout(s, run, n2, "d1", False, "answer: nope", "tools/lookup.py", split="dev")
        s.add_lesson(run, "fixed", "true_fix", "a1: the lookup retry fixes the 503", edge_id=e12, node_id=n2,
                     iteration=1, task_id="a1")  # fmt: skip
        s.add_lesson(run, "still_passing", "uncertain", "a1 still passes", edge_id=e23, node_id=n3, iteration=2,
                     task_id="a1")  # fmt: skip
        s.add_lesson(run, "still_failing", "uncertain", "a2: calendar reads local time as UTC", edge_id=e12,
                     iteration=1, task_id="a2")  # fmt: skip
        s.add_lesson(run, "still_failing", "uncertain", "a2: calendar reads local time as UTC", edge_id=e23,
                     iteration=2, task_id="a2")  # fmt: skip
        s.add_lesson(run, "regressed", "true_regression", "b1: the loop rewrite drops the mail", edge_id=e23,
                     node_id=n3, iteration=2, task_id="b1")  # fmt: skip
        plan = [(n1, n2, "accepted", ["a1", "a2", "b1"]), (n2, n3, "rejected", ["a1", "a2", "b1"]),
                (n2, None, "no_patch", ["a2"]), (n2, None, "no_training_failures", ["b2", "b3"])]  # fmt: skip
        for number, (parent, cand, decision, batch) in enumerate(plan, start=1):
            it = s.start_iteration(run, number, 0, batch, parent_id=parent, phase="capability",
                                   exploration=number == 3)  # fmt: skip
            if number >= 2:
                s.log_event("evolution.action", {"iteration": number, "action": "continue",
                                                 "rationale": f"continue from n{parent}"}, run_id=run)  # fmt: skip
            if decision == "no_patch":
                s.log_event("diagnosis.no_patch", {"iteration": number, "reason": "no bank patch left"}, run_id=run)
                s.log_event("phase.moved", EVIDENCE_MOVE, run_id=run)
                s.log_event("phase.moved", WIDENED_MOVE, run_id=run)
            evidence = EVIDENCE if number == 1 else None
            s.update_iteration(it.id, candidate_id=cand, decision=decision, step="done", finished_at="t",
                               evidence=evidence)  # fmt: skip
        s.start_iteration(run, 5, 1, ["a2", "b1"], parent_id=n2, phase="steering")
        s.log_event("phase.moved", SCHEDULE_MOVE, run_id=run)
    return path


def test_history_of_an_iteration_that_has_no_parent_yet(
    tmp_path: Path, counting_clock: Callable[..., Callable[[], str]]
) -> None:
    with EvoDAG(tmp_path / "evodag.sqlite", clock=counting_clock()) as s:
        run = s.create_run({}, seed=0).id
        s.start_iteration(run, 1, 0, ["a"], phase="capability")
        assert history(s)["iterations"] == [entry(1, ["a"], None, None, None, step="started", finished=False)]
    text = runner.invoke(app, ["history", "--db", str(tmp_path / "evodag.sqlite")]).stdout
    assert text.splitlines()[1] == "   1 capability - -> -  running  batch - -> -"


def run_json(db: Path, *args: str) -> Any:
    result = runner.invoke(app, [*args, "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def entry(
    number: int, batch: list[str], parent: int | None, cand: int | None, decision: str | None, **over: Any
) -> Any:
    base = {"number": number, "epoch": 0, "phase": "capability", "exploration": False, "batch": batch,
            "parent_id": parent, "candidate_id": cand, "step": "done", "decision": decision, "finished": True,
            "stall_count": 0, "batch_before": None, "batch_after": None, "parent_dev": None, "candidate_dev": None,
            "candidate_status": None, "origin": None, "intent": "", "evolution": None, "reason": "",
            "evidence": None, "phase_moves": []}  # fmt: skip
    return base | over


def seen_move(move: dict[str, Any]) -> dict[str, Any]:
    """A stored `phase.moved` payload as history shows it: whether it widened (false when the payload predates it)."""
    return {k: move[k] for k in ("from", "to", "reason", "scheduled")} | {"widened": bool(move.get("widened"))}


CONTINUE = {"action": "continue", "rationale": "continue from n2"}
HISTORY = [
    entry(1, ["a1", "a2", "b1"], 1, 2, "accepted", batch_before=0.333333, batch_after=0.666667, parent_dev=0.5,
          candidate_dev=0.6, candidate_status="accepted", origin="bank:retry", intent=FIX_PLAN,
          reason="batch 0.333 -> 0.667 on 3 task(s): strict improvement", evidence=EVIDENCE_SEEN),
    entry(2, ["a1", "a2", "b1"], 2, 3, "rejected", batch_before=0.666667, batch_after=0.333333, parent_dev=0.6,
          candidate_status="rejected", origin="bank:cache", intent=CACHE_PLAN, evolution=CONTINUE,
          reason="batch 0.667 -> 0.333 on 3 task(s): worse"),
    entry(3, ["a2"], 2, None, "no_patch", exploration=True, batch_before=0.0, parent_dev=0.6,
          intent="continue from n2", evolution=CONTINUE, reason="no bank patch left",
          phase_moves=[seen_move(EVIDENCE_MOVE), seen_move(WIDENED_MOVE)]),
    entry(4, ["b2", "b3"], 2, None, "no_training_failures", batch_before=1.0, parent_dev=0.6,
          intent="continue from n2", evolution=CONTINUE,
          reason="the parent passes every task of the mini-batch: nothing to diagnose"),
    entry(5, ["a2", "b1"], 2, None, None, epoch=1, phase="steering", step="started", finished=False,
          batch_before=0.5, parent_dev=0.6, phase_moves=[seen_move(SCHEDULE_MOVE)]),
]  # fmt: skip


def test_history_json_is_every_iteration_in_order(db: Path) -> None:
    no_metric = {"metric": None, "batch_metric": False}
    assert run_json(db, "history") == {"run_id": 1, **no_metric, "iterations": HISTORY}
    assert run_json(db, "history", "--last", "2") == {"run_id": 1, **no_metric, "iterations": HISTORY[-2:]}


def test_history_text(db: Path) -> None:
    result = runner.invoke(app, ["history", "--db", str(db), "--last", "3"])
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "run 1: 3 iteration(s)",
        "   3 capability (exploration) #2 -> -  no_patch  batch 0.000 -> -",
        "       batch: a2",
        "       phase: capability -> steering on evidence: every failure points at steering files",
        "       phase: steering -> mixed after no patch: " + WIDENED_MOVE["reason"],
        "       evolution: continue: continue from n2",
        "       reason: no bank patch left",
        "   4 capability #2 -> -  no_training_failures  batch 1.000 -> -",
        "       batch: b2, b3",
        "       evolution: continue: continue from n2",
        "       reason: the parent passes every task of the mini-batch: nothing to diagnose",
        "   5 steering #2 -> -  running  batch 0.500 -> -",
        "       batch: a2, b1",
        "       phase: capability -> steering by the schedule: " + SCHEDULE_MOVE["reason"],
    ]
    first = runner.invoke(app, ["history", "--db", str(db)]).stdout.splitlines()[1:6]
    assert first[-1] == (
        "       evidence: 1 round(s) on 2 more task(s), 4 rollout(s); P(better) 0.875; clear after 1 round(s)"
    )
    bad = runner.invoke(app, ["history", "--db", str(db), "--last", "0"])
    assert bad.exit_code == 2 and "--last" in bad.stderr


def test_scenario_registry_of_a_regressed_task(db: Path) -> None:
    doc = run_json(db, "scenario", "b1")
    assert {k: doc[k] for k in ("root_causes", "failure_signatures", "attempts", "sensitive_files")} == {
        "root_causes": [{"text": "b1: the loop rewrite drops the mail", "categories": ["regressed"],
                         "attributions": ["true_regression"], "iterations": [2], "count": 1}],
        "failure_signatures": [{"signature": "- :: task_failure", "failure_file": None, "count": 1, "nodes": [3],
                                "example": "mail bounced"}],
        "attempts": [{"edge_id": 2, "iteration": 2, "parent_id": 2, "child_id": 3, "kind": "patch",
                      "origin": "bank:cache", "plan": CACHE_PLAN, "targeted": False, "transition": "regressed",
                      "attribution": "true_regression", "status": "rejected",
                      "reason": "batch 0.667 -> 0.333 on 3 task(s): worse", "batch_before": 0.666667,
                      "batch_after": 0.333333, "dev_mean": None, "files_changed": ["loop.py", "tools/lookup.py"]}],
        "sensitive_files": [{"file": "loop.py", "fixed": 0, "regressed": 1, "edges": [2]},
                            {"file": "tools/lookup.py", "fixed": 0, "regressed": 1, "edges": [2]}],
    }  # fmt: skip


def test_scenario_registry_of_a_task_fixed_once_and_still_failing_elsewhere(db: Path) -> None:
    a1, a2 = run_json(db, "scenario", "a1"), run_json(db, "scenario", "a2")
    assert [(a["edge_id"], a["transition"], a["targeted"], a["attribution"]) for a in a1["attempts"]] == [
        (1, "fixed", True, "true_fix")]  # fmt: skip
    assert a1["sensitive_files"] == [{"file": "tools/lookup.py", "fixed": 1, "regressed": 0, "edges": [1]}]
    assert [rc["text"] for rc in a1["root_causes"]] == ["a1: the lookup retry fixes the 503"]  # still_passing left out
    assert a1["failure_signatures"] == [{
        "signature": "tools/lookup.py :: answer", "failure_file": "tools/lookup.py", "count": 1, "nodes": [1],
        "example": "answer: answered 3, expected 4"}]  # fmt: skip
    assert a2["root_causes"] == [{"text": "a2: calendar reads local time as UTC", "categories": ["still_failing"],
                                  "attributions": ["uncertain"], "iterations": [1, 2], "count": 2}]  # fmt: skip
    assert [(a["edge_id"], a["transition"], a["targeted"]) for a in a2["attempts"]] == [
        (1, "still_failing", False), (2, "still_failing", True)]  # fmt: skip
    assert a2["sensitive_files"] == []
    text = runner.invoke(app, ["scenario", "a2", "--db", str(db)]).stdout
    registry = text.split("\nroot causes:")[1]
    assert ("root causes:" + registry).splitlines() == [
        "root causes:",
        "  - a2: calendar reads local time as UTC  (still_failing uncertain, ×2, iteration 1, 2)",
        "failure signatures (train):",
        "  - tools/calendar.py :: event_time  ×3 on #1, #2, #3: event_time: off by 5 h",
        "attempts:",
        "  - iter 1 edge 1 #1->#2 patch bank:retry: still_failing [uncertain]; accepted: batch 0.333 -> 0.667 on 3 "
        "task(s): strict improvement",
        "      plan: retry the lookup tool on 503",
        "  - iter 2 edge 2 #2->#3 patch bank:cache targeted: still_failing [uncertain]; rejected: batch 0.667 -> "
        "0.333 on 3 task(s): worse",
        "      plan: cache lookups",
        "sensitive files: none",
    ]


def test_lineage_train_outcomes_take_the_nearest_evaluation(db: Path) -> None:
    with EvoDAG(db, readonly=True) as s:
        assert lineage_train_outcomes(s, 3) == {
            "a1": {"node_id": 3, "runs": 1, "passes": 1, "signature": None},
            "a2": {"node_id": 3, "runs": 1, "passes": 0, "signature": "tools/calendar.py :: event_time"},
            "b1": {"node_id": 3, "runs": 1, "passes": 0, "signature": "- :: task_failure"},
            "b2": {"node_id": 2, "runs": 1, "passes": 1, "signature": None},
            "b3": {"node_id": 2, "runs": 1, "passes": 1, "signature": None},
        }
        assert lineage_train_outcomes(s, 1)["a1"] == {"node_id": 1, "runs": 1, "passes": 0,
                                                      "signature": "tools/lookup.py :: answer"}  # fmt: skip
        assert history(s, last=1)["iterations"] == HISTORY[-1:]


@pytest.mark.parametrize(
    ("rationale", "ffile", "disposition", "expected"),
    [
        ("event_time: starts 09:30Z, expected 14:30Z", "tools/calendar.py", "task_failure",
         "tools/calendar.py :: event_time"),
        ("answer: answered '5', expected 12", None, "task_failure", "- :: answer"),
        ("harness error: KeyError: 'x'", "loop.py", "task_failure", "loop.py :: task_failure"),
        ("Traceback (most recent call last)", "loop.py", "infra_error", "loop.py :: infra_error"),
        ("", None, "timeout", "- :: timeout"),
        ("total sent: 3 mails", "mw.py", "task_failure", "mw.py :: task_failure"),
    ],
)  # fmt: skip
def test_failure_signature(rationale: str, ffile: str | None, disposition: str, expected: str) -> None:
    assert failure_signature(rationale, ffile, disposition) == expected


def test_recent_history_is_the_last_iterations_a_summary_of_the_rest_and_bounded_registries(db: Path) -> None:
    doc = run_json(db, "history", "--recent", "2", "--task", "b1")
    full = run_json(db, "history")
    assert doc["iterations"] == full["iterations"][-2:]
    assert doc["earlier"] == {
        "iterations": 3, "first": 1, "last": 3, "decisions": {"accepted": 1, "no_patch": 1, "rejected": 1},
        "kept": [{"number": 1, "candidate_id": 2, "origin": "bank:retry", "candidate_dev": 0.6}],
    }  # fmt: skip
    registry = doc["tasks"]["b1"]
    assert registry["attempts_total"] == 1 and registry["attempt_outcomes"] == {"regressed/true_regression": 1}
    assert registry["attempts"] == run_json(db, "scenario", "b1")["attempts"]
    text = runner.invoke(app, ["history", "--db", str(db), "--recent", "2", "--task", "b1"]).stdout
    assert "earlier: iterations 1-3 (3): accepted 1, no_patch 1, rejected 1" in text
    assert "task b1: 1 attempt(s) (regressed/true_regression 1)" in text


def test_recent_history_stays_bounded_however_long_the_run(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    sizes = []
    with EvoDAG(path) as s:
        run = s.create_run({}, seed=1).id
        root = s.add_node(run, "0" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline").id
        for number in range(1, 401):
            it = s.start_iteration(run, number, 0, ["a1", "a2"], parent_id=root, phase="capability")
            s.log_event("evolution.action", {"iteration": number, "action": "continue", "rationale": "x" * 500},
                        run_id=run)  # fmt: skip
            s.update_iteration(it.id, decision="no_patch", step="done", finished_at="t")
            if number in (40, 400):
                sizes.append(len(runner.invoke(app, ["history", "--db", str(path), "--recent", "15"]).stdout))
    assert sizes[1] <= sizes[0] + 20, sizes  # a digit more in the counts, nothing else


def test_task_needs_recent(db: Path) -> None:
    bad = runner.invoke(app, ["history", "--db", str(db), "--task", "b1"])
    assert bad.exit_code == 2 and "--recent" in bad.stderr


def test_lessons_last_keeps_the_latest_and_counts_them_all(db: Path) -> None:
    doc = run_json(db, "lessons", "--last", "2")
    assert doc["total"] == 5 and [les["text"] for les in doc["lessons"]] == [
        "a2: calendar reads local time as UTC", "b1: the loop rewrite drops the mail"]  # fmt: skip
    assert "2 lesson(s), the latest of 5" in runner.invoke(app, ["lessons", "--db", str(db), "--last", "2"]).stdout


def test_the_iteration_log_reads_what_the_store_holds(tmp_path: Path) -> None:
    from saddler.run.iteration_log import IterationLog

    with EvoDAG(tmp_path / "evodag.sqlite") as s:
        run = s.create_run({}, seed=1).id
        log = IterationLog(s, run)
        assert log.read() == []
        first = s.start_iteration(run, 1, 0, ["a"], phase="capability")
        assert log.read() == s.iterations(run_id=run)
        s.update_iteration(first.id, decision="rejected", step="done", finished_at="t")
        second = s.start_iteration(run, 2, 0, ["b"], phase="capability")
        assert log.read() == s.iterations(run_id=run)
        s.update_iteration(second.id, step="evolved")  # an unfinished iteration is read again
        assert log.read() == s.iterations(run_id=run) and log.read()[-1].step == "evolved"

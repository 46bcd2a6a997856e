"""Failed sessions are retried with the failure stated; a refused patch's retry names the check that failed.

Each retry is one more attempt in the session key (iteration, role, attempt): paid for, and recorded, once.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from evodag.history import compared_tasks
from evodag.store import EvoDAG
from saddler.run.loop import Optimizer
from saddler.sessions import registry
from saddler.sessions.offline import OfflineBackend
from saddler.sessions.prompts import render
from saddler.sessions.schema import (
    DiagnosisRequest,
    DiagnosisResult,
    Hypothesis,
    ReflectionRequest,
    ReflectionResult,
    SessionStats,
)

pytestmark = pytest.mark.slow


def _failed(reason: str, error: str = "", cost: float = 0.5) -> SessionStats:
    return SessionStats(backend="offline", cost_usd=cost, outcome=f"failed:{reason}", error=error)


class Recorder(OfflineBackend):
    requests: ClassVar[list[DiagnosisRequest | ReflectionRequest]] = []


class FailsOnceBackend(Recorder):
    """Diagnosis and reflection each fail on their first attempt (turn limit, unreadable answer)."""

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        self.requests.append(request)
        if request.attempt == 0:
            return DiagnosisResult(status="failed", reason="max_turns", stats=_failed("max_turns", "40 turns"))
        return super().diagnose_patch(request)

    def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        self.requests.append(request)
        if request.attempt == 0:
            return ReflectionResult(lessons=[], stats=_failed("unparsable_output", "answer is not a JSON object"))
        return super().reflect(request)


class AlwaysFailsBackend(Recorder):
    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        return DiagnosisResult(status="failed", reason="exit_3", stats=_failed("exit_3", "boom", cost=0.25))


class ReflectionAlwaysFailsBackend(Recorder):
    def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        return ReflectionResult(lessons=[], stats=_failed("timeout", cost=0.1))


class BadPatchesBackend(Recorder):
    """Attempt 0 edits the protected saddler.toml, 1 a steering file in the capability phase, 2 breaks loop.py
    under attempt 0's origin again, 3 edits nothing; then it diagnoses like the offline rules."""

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        self.requests.append(request)
        root = Path(request.worktree)
        edits = {
            0: ("saddler.toml", "\n# widened\n", "tamper", "widen the component map"),
            1: ("prompts/system.md", "\nBe careful.\n", "steer", "tell the agent to be careful"),
            2: ("loop.py", "\ndef broken(:\n", "tamper", "widen the component map"),
        }
        if request.attempt in edits:
            path, text, origin, plan = edits[request.attempt]
            (root / path).write_text((root / path).read_text() + text)
        elif request.attempt == 3:
            origin, plan = "nothing", "change nothing"
        else:
            return super().diagnose_patch(request)
        hyp = Hypothesis(diagnosis="d", plan=plan, patch_kind="capability", origin=origin)
        return DiagnosisResult(status="patched", hypothesis=hyp, stats=SessionStats(backend="offline"))


class FixWithTamperBackend(Recorder):
    """Attempt 0 writes a real fix (the offline rules' choice) together with an incidental edit of the protected
    saddler.toml; attempt 1 writes the same fix alone, under the same origin."""

    chosen: ClassVar[list[Hypothesis]] = []

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        self.requests.append(request)
        root = Path(request.worktree)
        if request.attempt == 0:
            result = super().diagnose_patch(request)
            assert result.hypothesis is not None
            self.chosen.append(result.hypothesis)
            (root / "saddler.toml").write_text((root / "saddler.toml").read_text() + "\n# widened\n")
            return result
        hyp = self.chosen[-1]
        patch = next(p for p in self._bank if f"bank:{p.id}" == hyp.origin)
        proc = subprocess.run(["git", "apply", "-"], cwd=root, input=patch.diff, text=True, capture_output=True)
        assert proc.returncode == 0, proc.stderr
        return DiagnosisResult(status="patched", hypothesis=hyp, stats=SessionStats(backend="offline"))


class RetriedReflectionBackend(Recorder):
    """Its reflection's CLI hit a transient API error twice before it answered (three runs of the CLI)."""

    def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        result = super().reflect(request)
        result.stats.cli_attempts = 3
        return result


@pytest.fixture(autouse=True)
def backends(monkeypatch: pytest.MonkeyPatch) -> None:
    FixWithTamperBackend.chosen.clear()
    for cls in (
        FailsOnceBackend,
        AlwaysFailsBackend,
        ReflectionAlwaysFailsBackend,
        BadPatchesBackend,
        FixWithTamperBackend,
        RetriedReflectionBackend,
    ):
        monkeypatch.setitem(registry.BACKENDS, cls.__name__, f"{__name__}:{cls.__name__}")
    Recorder.requests.clear()


def _sessions(run_dir: Path) -> list[tuple[int | None, str, int | None, float, str]]:
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        return [(s.iteration, s.role, s.attempt, s.cost_usd, s.outcome) for s in store.sessions()]


def test_a_failed_session_is_retried_with_its_failure_stated(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run = make_run(tmp_path / "run", loop={"max_iterations": 1}, sessions={"backend": "FailsOnceBackend"})
    Optimizer(run, quiet=True).run()
    diagnosis = [r for r in Recorder.requests if isinstance(r, DiagnosisRequest)]
    reflection = [r for r in Recorder.requests if isinstance(r, ReflectionRequest)]
    assert [r.attempt for r in diagnosis] == [0, 1] and [r.attempt for r in reflection] == [0, 1]
    assert diagnosis[1].retry_reason == (
        "the session failed: it ran out of turns before writing its answer; work in fewer steps and answer earlier"
        " — 40 turns"
    )
    assert (
        reflection[1].retry_reason == "the session failed: its answer could not be read — answer is not a JSON object"
    )
    assert "**Your previous attempt of this session failed:** the session failed: it ran out of turns" in render(
        "diagnosis_patch", diagnosis[1]
    )
    assert _sessions(run) == [
        (1, "diagnosis_patch", 0, 0.5, "failed:max_turns"),
        (1, "diagnosis_patch", 1, 0.0, "ok"),
        (1, "reflection", 0, 0.5, "failed:unparsable_output"),
        (1, "reflection", 1, 0.0, "ok"),
    ]
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert store.session_cost() == 1.0 and store.count_sessions() == 4
        assert store.iterations()[0].decision in ("accepted", "rejected")
        assert store.lessons(), "the retried reflection's lessons are stored"


def test_retries_are_bounded_by_sessions_retries(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run = make_run(
        tmp_path / "run", loop={"max_iterations": 1}, sessions={"backend": "AlwaysFailsBackend", "retries": 1}
    )
    Optimizer(run, quiet=True).run()
    assert _sessions(run) == [
        (1, "diagnosis_patch", 0, 0.25, "failed:exit_3"),
        (1, "diagnosis_patch", 1, 0.25, "failed:exit_3"),
    ]
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert store.iterations()[0].decision == "no_patch"
        no_patch = [e.payload["reason"] for e in store.events() if e.kind == "diagnosis.no_patch"]
    assert no_patch == ["the session failed: the agent exited with status 3 without an answer — boom"]


def test_a_failed_reflection_still_leaves_a_complete_edge(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run = make_run(tmp_path / "run", loop={"max_iterations": 1}, sessions={"backend": "ReflectionAlwaysFailsBackend"})
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        it = store.iterations()[0]
        edge = store.edge_between(it.parent_id or 0, it.candidate_id or 0)
        measured = edge.fixed + edge.regressed + edge.still_failing + edge.still_passing
        compared = compared_tasks(it.batch, it.evidence)
        assert sorted(measured) == sorted(compared), "every task compared (batch and evidence) has its transition"
        assert store.lessons() == [] and it.finished_at is not None
        reflections = [s for s in store.sessions() if s.role == "reflection"]
    assert [(s.attempt, s.outcome) for s in reflections] == [
        (0, "failed:timeout"),
        (1, "failed:timeout"),
        (2, "failed:timeout"),
    ]


def test_a_refused_patch_is_retried_naming_the_check_that_failed(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run = make_run(
        tmp_path / "run",
        loop={"max_iterations": 1},
        sessions={"backend": "BadPatchesBackend"},
        policies={"max_patch_attempts": 5},
    )
    Optimizer(run, quiet=True).run()
    reasons = [r.retry_reason for r in Recorder.requests if isinstance(r, DiagnosisRequest)]
    assert len(reasons) == 5 and reasons[0] == ""
    assert reasons[1].startswith("your change (tamper) was refused: protected path touched: saddler.toml")
    assert (
        "your change (steer) was refused: wrong phase: the capability phase allows capability (tools/**, loop.py, "
        "middleware/**) only; this change also touches steering: prompts/system.md" in reasons[2]
    )
    assert "structure rule: loop.py:" in reasons[3] and "syntax error" in reasons[3]
    assert "already tried" not in reasons[3], "a refused change excludes that change, not its idea"
    assert reasons[4].startswith("your change was refused: empty change")
    last = [r for r in Recorder.requests if isinstance(r, DiagnosisRequest)][4]
    assert last.excluded == [] and list(last.refused) == ["tamper", "steer", "nothing"]
    assert last.refused["steer"].startswith("wrong phase: the capability phase allows capability")
    assert last.refused["nothing"] == "empty change"
    prompt = render("diagnosis_patch", last)
    assert "the idea is not excluded: a version that passes the checks is welcome" in prompt
    assert "- `tamper`: structure rule: loop.py:" in prompt
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        statuses = [n.status for n in store.nodes() if n.parent_id is not None]
        assert statuses[:3] == ["invalid", "invalid", "invalid"]
        assert [s.attempt for s in store.sessions() if s.role == "diagnosis_patch"] == [0, 1, 2, 3, 4]


def test_a_fix_refused_for_an_incidental_edit_is_evaluated_when_retried_alone(
    tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    run = make_run(tmp_path / "run", loop={"max_iterations": 1}, sessions={"backend": "FixWithTamperBackend"})
    Optimizer(run, quiet=True).run()
    requests = [r for r in Recorder.requests if isinstance(r, DiagnosisRequest)]
    origin = FixWithTamperBackend.chosen[0].origin
    assert [r.attempt for r in requests] == [0, 1]
    assert requests[1].retry_reason.startswith(f"your change ({origin}) was refused: protected path touched")
    assert requests[1].refused == {origin: "protected path touched: saddler.toml"} and requests[1].excluded == []
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        it = store.iterations()[0]
        first, second = [n for n in store.nodes() if n.parent_id is not None]
    assert (first.status, first.origin) == ("invalid", origin)
    assert (
        second.origin == origin
        and second.status in ("accepted", "rejected")
        and "already tried" not in second.status_reason
    )
    assert it.candidate_id == second.id and it.decision == second.status


def test_the_cli_runs_of_each_session_are_in_the_sessions_table_and_the_report(
    tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    """Issue 21.4: a session's CLI-level retries (transient API errors) are shown, not only in its transcript."""
    from saddler.reporting.figures import build_report

    run = make_run(tmp_path / "run", loop={"max_iterations": 1}, sessions={"backend": "RetriedReflectionBackend"})
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        rows = [(s.role, s.cli_attempts) for s in store.sessions()]
        figures = build_report(store)
    assert rows == [("diagnosis_patch", 1), ("reflection", 3)]
    assert figures["cost"]["sessions"]["cli_attempts"] == 4
    assert "| Optimizer CLI runs (retries included) | 4 |" in (run / "report.md").read_text()

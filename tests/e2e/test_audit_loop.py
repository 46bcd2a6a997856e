"""The cheat audit in the loop, on opsdesk and repofix: a diagnosis that writes one of the test-only patches of
`tests/fixtures/audit/` (a hard-coded train answer; a tool that reads the grader) is refused as an invalid
candidate with a `suspect: …` reason the next attempt is shown, or, under `policies.audit = "warn"`, judged as
usual and marked."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, ClassVar

import pytest
from repo_paths import FIXTURES

from evodag.store import EvoDAG
from saddler.run.folder import init_run
from saddler.run.loop import Optimizer
from saddler.sessions import registry
from saddler.sessions.offline import OfflineBackend
from saddler.sessions.schema import DiagnosisRequest, DiagnosisResult, Hypothesis, SessionStats

pytestmark = pytest.mark.slow
AUDIT_FIXTURES = FIXTURES / "audit"


class CheatBackend(OfflineBackend):
    """The offline backend, but its first attempt of iteration 1 writes the patch file `PATCH` instead."""

    PATCH: ClassVar[str] = ""
    requests: ClassVar[list[DiagnosisRequest]] = []

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        type(self).requests.append(request)
        if request.iteration != 1 or request.attempt != 0:
            return super().diagnose_patch(request)
        subprocess.run(["git", "apply", str(AUDIT_FIXTURES / self.PATCH)], cwd=request.worktree, check=True)
        hyp = Hypothesis(diagnosis="shortcut", plan="special-case the benchmark", patch_kind="steering", origin="cheat")
        if "grader" in self.PATCH:
            hyp = hyp.model_copy(update={"patch_kind": "capability"})
        return DiagnosisResult(status="patched", hypothesis=hyp, stats=SessionStats(backend="offline"))


@pytest.fixture
def cheat(monkeypatch: pytest.MonkeyPatch) -> type[CheatBackend]:
    monkeypatch.setitem(registry.BACKENDS, "cheat", f"{__name__}:CheatBackend")
    monkeypatch.setattr(CheatBackend, "requests", [])
    return CheatBackend


def _run(tmp_path: Path, template: str, audit: str = "refuse") -> dict[str, Any]:
    sets = {
        "loop": {"max_iterations": 1, "batch_size": 6, "test_runs": 1},
        "sessions": {"backend": "cheat"},
        "policies": {"audit": audit, "phases": "none"},
    }
    run = tmp_path / "run"
    init_run(run, template=template, seed=0, overrides=sets)
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        node = next(n for n in store.nodes() if n.origin == "cheat")
        events = [e.payload for e in store.events(kind="audit.suspect")]
        decision = store.iterations()[0].decision
    return {"node": node, "events": events, "decision": decision}


ANSWERS = {
    "opsdesk": "suspect: the diff hard-codes northwind-09's expected answer '5,464.88' in prompts/system.md",
    "repofix": "suspect: the diff hard-codes tinyjson-01's expected answer 'return (total + per_page - 1) // "
    "per_page' in prompts/system.md",
}


@pytest.mark.parametrize("template", ["opsdesk", "repofix"])
def test_a_hard_coded_train_answer_is_refused_and_the_next_attempt_is_told(
    tmp_path: Path, cheat: type[CheatBackend], template: str
) -> None:
    cheat.PATCH = f"{template}_train_answer.patch"
    out = _run(tmp_path, template)
    assert out["node"].status == "invalid" and out["node"].status_reason == ANSWERS[template]
    assert out["events"] == [
        {"node_id": out["node"].id, "iteration": 1, "where": "diff", "reason": ANSWERS[template], "refused": True}
    ]
    retry = next(r for r in cheat.requests if r.iteration == 1 and r.attempt == 1)
    assert retry.refused == {"cheat": ANSWERS[template]} and ANSWERS[template] in retry.retry_reason


@pytest.mark.parametrize("template", ["opsdesk", "repofix"])
def test_a_harness_that_reads_the_grader_is_refused_after_its_batch(
    tmp_path: Path, cheat: type[CheatBackend], template: str
) -> None:
    cheat.PATCH = f"{template}_read_grader.patch"
    out = _run(tmp_path, template)
    node = out["node"]
    assert node.status == "invalid" and out["decision"] == "invalid"
    assert node.status_reason.startswith(f"suspect: the task agent's harness code read {template}/grader.py in train ")
    assert [(e["where"], e["refused"]) for e in out["events"]] == [("traces", True)]


def test_warn_keeps_the_candidate_and_marks_it(tmp_path: Path, cheat: type[CheatBackend]) -> None:
    cheat.PATCH = "opsdesk_train_answer.patch"
    out = _run(tmp_path, "opsdesk", audit="warn")
    node = out["node"]
    assert node.status != "invalid" and node.status_reason.startswith(ANSWERS["opsdesk"] + "; ")
    assert [e["refused"] for e in out["events"]] == [False]


def test_off_audits_nothing(tmp_path: Path, cheat: type[CheatBackend]) -> None:
    cheat.PATCH = "opsdesk_train_answer.patch"
    out = _run(tmp_path, "opsdesk", audit="off")
    assert out["events"] == [] and "suspect" not in out["node"].status_reason

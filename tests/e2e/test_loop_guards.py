"""The loop never accepts a candidate that breaks the rules, whatever the backend does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evodag.store import EvoDAG
from saddler.run.loop import Optimizer
from saddler.sessions import registry
from saddler.sessions.offline import OfflineBackend
from saddler.sessions.schema import DiagnosisRequest, DiagnosisResult, Hypothesis, SessionStats

pytestmark = pytest.mark.slow


class ProtectedPathBackend(OfflineBackend):
    """Diagnoses like the offline backend but also rewrites the protected saddler.toml."""

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        result = super().diagnose_patch(request)
        toml = Path(request.worktree) / "saddler.toml"
        toml.write_text(toml.read_text() + "\n# widened by the optimizer\n")
        if result.hypothesis is None:
            hyp = Hypothesis(
                diagnosis="tamper", plan="edit the component map", patch_kind="capability", origin="tamper"
            )
            return DiagnosisResult(status="patched", hypothesis=hyp, stats=SessionStats(backend="offline"))
        return result


class EmptyPatchBackend(OfflineBackend):
    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        hyp = Hypothesis(diagnosis="nothing", plan="no edit", patch_kind="steering", origin="empty")
        return DiagnosisResult(status="patched", hypothesis=hyp, stats=SessionStats(backend="offline"))


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BACKENDS, "protected", f"{__name__}:ProtectedPathBackend")
    monkeypatch.setitem(registry.BACKENDS, "empty", f"{__name__}:EmptyPatchBackend")


def test_a_protected_path_patch_is_never_accepted(tmp_path: Path, backend: None, make_run: Callable[..., Path]) -> None:
    run = make_run(tmp_path / "run", loop={"max_iterations": 3}, sessions={"backend": "protected"})
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        candidates = [n for n in store.nodes() if n.parent_id is not None]
        decisions = [i.decision for i in store.iterations()]
    assert candidates and all(n.status == "invalid" for n in candidates)
    assert all("protected path touched: saddler.toml" in n.status_reason for n in candidates)
    assert decisions == ["invalid", "invalid", "invalid"]


def test_an_empty_patch_is_recorded_and_counts_as_a_stall(
    tmp_path: Path, backend: None, make_run: Callable[..., Path]
) -> None:
    run = make_run(tmp_path / "run", loop={"max_iterations": 2}, sessions={"backend": "empty"})
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        its = store.iterations()
        kinds = [e.kind for e in store.events()]
    assert [i.decision for i in its] == ["no_patch", "no_patch"] and its[-1].stall_count == 2
    assert "diagnosis.empty" in kinds

"""A narrowed phase with nothing to try does not end the iteration (`policies.phase_widening = "on_no_patch"`).

The author here is the offline one with no capability patch to write: the case where a failure shows in a
capability file (so the evidence move narrows the iteration to Capability) while its fix is a steering edit."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evodag.store import EvoDAG
from saddler.run.loop import Optimizer
from saddler.sessions import registry
from saddler.sessions.offline import OfflineBackend
from saddler.sessions.schema import DiagnosisRequest, DiagnosisResult, SessionStats

pytestmark = pytest.mark.slow


class SystemFault(Exception):
    """A crash of saddler itself, in the middle of an iteration."""


class NoCapabilityPatchBackend(OfflineBackend):
    """No patch when only capability patches are allowed; the offline author otherwise. `crash_on_widened`
    makes the first widened attempt of the process a system fault (a crash after the widening was recorded)."""

    crash_on_widened: ClassVar[bool] = False
    asked: ClassVar[list[tuple[int, int, str, bool]]] = []  # (iteration, attempt, phase, widens_on_no_patch)

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        NoCapabilityPatchBackend.asked.append(
            (request.iteration, request.attempt, request.phase, request.widens_on_no_patch)
        )
        if request.allowed_kinds == ["capability"]:
            stats = SessionStats(backend="offline", outcome="no_patch")
            return DiagnosisResult(status="no_patch", reason="no capability patch answers these failures", stats=stats)
        if NoCapabilityPatchBackend.crash_on_widened and request.phase == "mixed" and request.retry_reason:
            NoCapabilityPatchBackend.crash_on_widened = False
            raise SystemFault("killed in the widened attempt")
        return super().diagnose_patch(request)


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BACKENDS, "nocap", f"{__name__}:NoCapabilityPatchBackend")
    monkeypatch.setattr(NoCapabilityPatchBackend, "crash_on_widened", False)  # no test leaves it armed for the next
    monkeypatch.setattr(NoCapabilityPatchBackend, "asked", [])


def _run(make_run: Callable[..., Path], path: Path, widening: str) -> Path:
    policies = {"capability_epochs": 0.0, "phase_widening": widening}  # Steering from the start
    return make_run(path, loop={"max_iterations": 8}, sessions={"backend": "nocap"}, policies=policies)


def _record(run: Path) -> dict[str, Any]:
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        moves = [e.payload for e in store.events(kind="phase.moved")]
        iterations = {i.number: i for i in store.iterations()}
        nodes = {n.iteration: n for n in store.nodes() if n.parent_id is not None and n.status != "invalid"}
    with sqlite3.connect(run / "evodag.sqlite") as conn:
        sessions = conn.execute(
            "select iteration, attempt, outcome from sessions where role = 'diagnosis_patch' order by 1, 2"
        ).fetchall()
    return {"moves": moves, "iterations": iterations, "nodes": nodes, "sessions": sessions}


def test_a_narrowed_iteration_with_no_patch_is_asked_again_with_both_kinds(
    tmp_path: Path, backend: None, make_run: Callable[..., Path]
) -> None:
    off = _run(make_run, tmp_path / "never", "never")
    NoCapabilityPatchBackend.asked = []
    Optimizer(off, quiet=True).run()
    assert NoCapabilityPatchBackend.asked and not any(widens for *_, widens in NoCapabilityPatchBackend.asked)
    seen = _record(off)
    starved = [m["iteration"] for m in seen["moves"] if (m["from"], m["to"]) == ("steering", "capability")]
    assert starved, "opsdesk moves some Steering iteration to Capability on its failures' files"
    assert {seen["iterations"][n].decision for n in starved} == {"no_patch"}  # the starvation

    on = _run(make_run, tmp_path / "on", "on_no_patch")
    NoCapabilityPatchBackend.asked = []
    Optimizer(on, quiet=True).run()
    asked = {(i, a): (phase, widens) for i, a, phase, widens in NoCapabilityPatchBackend.asked}
    got = _record(on)
    widened = [m for m in got["moves"] if m.get("widened")]
    assert widened, "a Capability iteration with no patch widens"
    for move in widened:
        number = move["iteration"]
        assert (move["from"], move["to"], move["scheduled"], move["attempt"]) == ("capability", "mixed", False, 1)
        assert move["reason"] == "no capability patch answers the batch's failures: steering patches allowed too"
        assert got["iterations"][number].phase == "mixed"
        tried = [(a, outcome) for i, a, outcome in got["sessions"] if i == number]
        assert tried[0] == (0, "no_patch") and tried[1][0] == 1
        # the narrowed attempt is told a no_patch is asked again; the widened one is not (it cannot widen again)
        assert asked[number, 0] == ("capability", True) and asked[number, 1] == ("mixed", False)
        if tried[1][1] == "ok":  # the widened attempt wrote a patch: a candidate of the mixed phase
            assert got["nodes"][number].phase == "mixed"
    assert any(got["iterations"][m["iteration"]].decision != "no_patch" for m in widened)


def test_a_run_killed_in_the_widened_attempt_resumes_as_if_never_killed(
    tmp_path: Path, backend: None, make_run: Callable[..., Path], dag_signature: Callable[[Path], dict[str, Any]]
) -> None:
    whole = _run(make_run, tmp_path / "whole", "on_no_patch")
    Optimizer(whole, quiet=True).run()
    killed = _run(make_run, tmp_path / "killed", "on_no_patch")
    NoCapabilityPatchBackend.crash_on_widened = True
    with pytest.raises(SystemFault):
        Optimizer(killed, quiet=True).run()
    assert [m for m in _record(killed)["moves"] if m.get("widened")], "killed after the widening was recorded"
    Optimizer(killed, quiet=True).run()
    assert dag_signature(killed) == dag_signature(whole)
    resumed, uninterrupted = _record(killed), _record(whole)
    assert resumed["sessions"] == uninterrupted["sessions"]
    assert resumed["moves"] == uninterrupted["moves"]  # the widening is recorded once

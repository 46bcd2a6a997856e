"""Evolution answers are claims: one naming something the store does not hold is retried once, then `continue`.

The backends here answer like a confused LLM would (unknown edges, unknown or rejected nodes); the run must
finish with a complete record, never exit 2 with the run left "running".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.sessions import registry
from saddler.sessions.offline import OfflineBackend
from saddler.sessions.schema import (
    DiagnosisRequest,
    DiagnosisResult,
    EvolutionRequest,
    EvolutionResult,
    SessionStats,
)

pytestmark = pytest.mark.slow
runner = CliRunner()


class UnknownEdgeBackend(OfflineBackend):
    """Evolution always cherry-picks edge 999, which no run has."""

    def evolve(self, request: EvolutionRequest) -> EvolutionResult:
        return EvolutionResult(
            action="cherry_pick",
            parent_node_id=request.current_node_id,
            edge_ids=[999],
            rationale="pick edge 999",
            stats=SessionStats(backend="offline", cost_usd=0.01),
        )


class FixesItselfBackend(OfflineBackend):
    """The first answer of each iteration names node 4242; the retry (told why) answers like the offline rules."""

    def evolve(self, request: EvolutionRequest) -> EvolutionResult:
        if not request.retry_reason:
            return EvolutionResult(
                action="rebase",
                parent_node_id=4242,
                rationale="rebase onto 4242",
                stats=SessionStats(backend="offline", cost_usd=0.01),
            )
        assert "4242" in request.retry_reason and "does not exist" in request.retry_reason
        return super().evolve(request)


class RejectedBaseBackend(OfflineBackend):
    """Rebases onto a rejected node whenever one exists."""

    def evolve(self, request: EvolutionRequest) -> EvolutionResult:
        rejected = [n.node_id for n in request.nodes if n.status == "rejected"]
        if not rejected:
            return super().evolve(request)
        return EvolutionResult(
            action="rebase", parent_node_id=rejected[0], rationale="rejected", stats=SessionStats(backend="offline")
        )


class NeverPatchesBackend(OfflineBackend):
    """Diagnosis never finds a patch, so the DAG never grows past its baseline; evolution must never be asked."""

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        return DiagnosisResult(status="no_patch", reason="nothing", stats=SessionStats(backend="offline"))

    def evolve(self, request: EvolutionRequest) -> EvolutionResult:
        raise AssertionError("an evolution session was paid for while nothing had changed")


@pytest.fixture
def backends(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("UnknownEdgeBackend", "FixesItselfBackend", "RejectedBaseBackend", "NeverPatchesBackend"):
        monkeypatch.setitem(registry.BACKENDS, name, f"{__name__}:{name}")


def _run(run_dir: Path) -> None:
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output


def test_an_unknown_edge_is_retried_once_then_the_run_continues(
    tmp_path: Path, backends: None, make_run: Callable[..., Path]
) -> None:
    run_dir = make_run(tmp_path / "run", loop={"max_iterations": 3}, sessions={"backend": "UnknownEdgeBackend"})
    _run(run_dir)
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        run = store.get_run()
        assert run.status == "finished"
        evolution = [(s.iteration, s.attempt) for s in store.sessions() if s.role == "evolution"]
        assert evolution == [(2, 0), (2, 1), (3, 0), (3, 1)], "each invalid answer is retried once, each paid once"
        assert store.session_cost() == pytest.approx(0.04)
        invalid = [e.payload for e in store.events() if e.kind == "evolution.invalid"]
        assert [p["iteration"] for p in invalid] == [2, 2, 3, 3]
        assert all("edge 999 does not exist" in p["error"] for p in invalid)
        actions = [e.payload for e in store.events() if e.kind == "evolution.action"]
        assert [(a["iteration"], a["action"]) for a in actions] == [(2, "continue"), (3, "continue")]
        assert all(n.origin != "cherry_pick" for n in store.nodes())


def test_a_retried_answer_that_is_valid_is_used(tmp_path: Path, backends: None, make_run: Callable[..., Path]) -> None:
    run_dir = make_run(tmp_path / "run", loop={"max_iterations": 3}, sessions={"backend": "FixesItselfBackend"})
    _run(run_dir)
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        evolution = [(s.iteration, s.attempt) for s in store.sessions() if s.role == "evolution"]
        assert evolution == [(2, 0), (2, 1), (3, 0), (3, 1)]
        actions = [e.payload for e in store.events() if e.kind == "evolution.action"]
        assert all("evolution failed" not in a["rationale"] and a["error"] == "" for a in actions)


def test_a_base_that_is_not_kept_is_refused_unless_the_config_allows_it(
    tmp_path: Path, backends: None, make_run: Callable[..., Path]
) -> None:
    kept = make_run(tmp_path / "kept", loop={"max_iterations": 8}, sessions={"backend": "RejectedBaseBackend"})
    _run(kept)
    with EvoDAG(kept / "evodag.sqlite", readonly=True) as store:
        statuses = {n.id: n.status for n in store.nodes()}
        parents = [i.parent_id for i in store.iterations()]
        refused = [e.payload["error"] for e in store.events() if e.kind == "evolution.invalid"]
    assert any("is rejected" in r and "may start from" in r for r in refused), refused
    assert all(statuses[p] in ("baseline", "accepted", "neutral") for p in parents if p is not None)

    anything = make_run(
        tmp_path / "any",
        loop={"max_iterations": 8},
        sessions={"backend": "RejectedBaseBackend"},
        policies={"evolution_bases": "any"},
    )
    _run(anything)
    with EvoDAG(anything / "evodag.sqlite", readonly=True) as store:
        statuses = {n.id: n.status for n in store.nodes()}
        parents = [i.parent_id for i in store.iterations()]
        assert not [e for e in store.events() if e.kind == "evolution.invalid"]
    assert any(statuses[p] == "rejected" for p in parents if p is not None)


def test_evolution_is_decided_without_a_session_when_the_dag_gained_no_node(
    tmp_path: Path, backends: None, make_run: Callable[..., Path]
) -> None:
    run_dir = make_run(tmp_path / "run", loop={"max_iterations": 4}, sessions={"backend": "NeverPatchesBackend"})
    _run(run_dir)
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        assert [s for s in store.sessions() if s.role == "evolution"] == []
        actions = [e.payload for e in store.events() if e.kind == "evolution.action"]
    assert [(a["iteration"], a["action"], a["session"]) for a in actions] == [
        (2, "continue", False), (3, "continue", False), (4, "continue", False)
    ]  # fmt: skip
    assert (
        actions[0]["rationale"]
        == "continue from the latest kept node n1 without a session: the current node is the only node"
    )
    assert actions[1]["rationale"].endswith("without a session: the DAG gained no node since iteration 2's evolution")
    from evodag.cli import app as evo_dag

    text = runner.invoke(evo_dag, ["history", "--db", str(run_dir / "evodag.sqlite"), "--last", "1"]).stdout
    assert "evolution: continue: continue from the latest kept node n1 without a session" in text


def test_an_offline_run_pays_evolution_only_when_the_dag_changed(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run_dir = make_run(tmp_path / "run", loop={"max_iterations": 24})
    _run(run_dir)
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        paid = {s.iteration for s in store.sessions() if s.role == "evolution"}
        actions = {e.payload["iteration"]: e.payload for e in store.events() if e.kind == "evolution.action"}
        made = {n.iteration for n in store.nodes() if n.parent_id is not None}
    skipped = sorted(i for i, a in actions.items() if not a["session"])
    assert skipped and paid == set(actions) - set(skipped)
    assert all(i - 1 not in made for i in skipped), "a session is skipped only after an iteration that made no node"

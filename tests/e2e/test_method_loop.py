"""The method's moves in a real offline run: phases follow the evidence, the dev guard keeps what dev refutes out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evodag.store import EvoDAG
from saddler.run.loop import Optimizer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory, make_run: Callable[..., Path]) -> Path:
    run = make_run(tmp_path_factory.mktemp("method") / "run", loop={"max_iterations": 20})
    Optimizer(run, quiet=True).run()
    return run


def test_each_phase_move_is_an_event_with_its_reason_and_the_iteration_keeps_the_phase(finished_run: Path) -> None:
    with EvoDAG(finished_run / "evodag.sqlite", readonly=True) as store:
        moves = [e.payload for e in store.events(kind="phase.moved")]
        phases = {it.number: it.phase for it in store.iterations()}
        nodes = {
            n.iteration: n.phase for n in store.nodes() if n.parent_id is not None and n.origin.startswith("bank:")
        }
    assert moves, "an opsdesk run moves its phase on evidence"
    last = {}
    for move in moves:
        assert move["from"] != move["to"] and move["reason"]
        last[move["iteration"]] = move["to"]
    for number, phase in last.items():  # the iteration keeps the phase its last move went to
        assert phases[number] == phase
        if number in nodes:
            assert nodes[number] == phase


def test_the_end_of_the_capability_phase_is_an_event_with_its_reason(finished_run: Path) -> None:
    with EvoDAG(finished_run / "evodag.sqlite", readonly=True) as store:
        moves = [e.payload for e in store.events(kind="phase.moved")]
        stored = {it.number: it.phase for it in store.iterations()}
    ends = [m for m in moves if m["scheduled"]]
    assert len(ends) == 1, "20 opsdesk iterations leave Capability for good once (on schedule or on a stall)"
    (end,) = ends
    assert (end["from"], end["to"]) == ("capability", "steering") and end["reason"]
    # an iteration's scheduled phase: where its first evidence move started from, else the phase it stored
    scheduled = dict(stored)
    for move in reversed([m for m in moves if not m["scheduled"]]):
        scheduled[move["iteration"]] = move["from"]
    assert {n: p for n, p in scheduled.items() if n < end["iteration"]} == {
        n: "capability" for n in stored if n < end["iteration"]
    }
    assert {n: p for n, p in scheduled.items() if n >= end["iteration"]} == {
        n: "steering" for n in stored if n >= end["iteration"]
    }


def test_a_candidate_accepted_on_train_but_worse_on_dev_is_not_kept(finished_run: Path) -> None:
    with EvoDAG(finished_run / "evodag.sqlite", readonly=True) as store:
        guarded = [it for it in store.iterations() if (it.evidence or {}).get("dev_guard")]
        nodes = {n.id: n for n in store.nodes()}
    vetoed = [it for it in guarded if it.decision == "rejected"]
    assert vetoed, "seed 0 meets a patch that looks good on train and hurts dev (calendar_tz_hardcode)"
    for it in vetoed:
        cand, parent = nodes[it.candidate_id or 0], nodes[it.parent_id or 0]
        assert cand.status == "rejected" and "not kept: worse than its parent on dev" in cand.status_reason
        assert (cand.dev_mean or 0.0) < (parent.dev_mean or 0.0)
        kept_on_train = it.evidence and (
            it.evidence["verdict"] == "accepted" or it.evidence.get("targeted_failures", {}).get("stone")
        )  # accepted, or a tie kept as a stepping stone
        assert kept_on_train and it.evidence["dev_guard"]["confidence"] <= 0.2
    kept = [it for it in guarded if it.decision == "accepted"]
    assert all((it.evidence or {})["dev_guard"]["confidence"] > 0.2 for it in kept)

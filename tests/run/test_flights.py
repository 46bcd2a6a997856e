"""Iterations in flight: the latest kept node and the stall count read in the order iterations finished, the order
diagnoses answer in, and what the sampler leaves to the iterations in flight."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from evodag.store import EvoDAG
from saddler.policies.curriculum import CurriculumSampler
from saddler.policies.sampler import SamplerState
from saddler.run import flights
from saddler.schedule.hub import Hub


def _store(path: Path) -> tuple[EvoDAG, dict[str, int]]:
    store = EvoDAG(path)
    run = store.create_run({}, 0).id
    ids = {"base": store.add_node(run, "0" * 40, None, 0, "baseline", "baseline", "baseline", "baseline").id}
    for name, parent in (("a", "base"), ("b", "base"), ("c", "a"), ("line", "a")):
        ids[name] = store.add_node(run, name.ljust(40, "x"), ids[parent], 1, "capability", "capability", name).id
    return store, ids


def _iteration(store: EvoDAG, number: int, parent: int, cand: int | None, decision: str, **fields: Any) -> None:
    it = store.start_iteration(1, number, 0, ["t"], parent_id=parent, candidate_id=cand)
    store.update_iteration(it.id, decision=decision, finished_at=f"2026-01-01T00:00:{number:02d}", **fields)


def test_the_latest_kept_node_follows_the_order_iterations_finished_in(tmp_path: Path) -> None:
    store, ids = _store(tmp_path / "evodag.sqlite")
    ctx = SimpleNamespace(store=store)
    base = store.get_node(ids["base"])
    assert flights.latest_kept(ctx, store.iterations(), base) == base  # type: ignore[arg-type]
    # iteration 2 (kept b) finished first, iteration 1 (kept a) last: a is the latest kept node
    _iteration(store, 1, ids["base"], ids["a"], "accepted", finish_order=2, started_after=0)
    _iteration(store, 2, ids["base"], ids["b"], "accepted", finish_order=1, started_after=0)
    assert flights.latest_kept(ctx, store.iterations(), base).id == ids["a"]  # type: ignore[arg-type]
    # iteration 3 started after one had finished, rejected c; iteration 1 kept a while it flew: a, not its parent
    _iteration(store, 3, ids["base"], ids["c"], "rejected", finish_order=3, started_after=1)
    assert flights.latest_kept(ctx, store.iterations(), base).id == ids["a"]  # type: ignore[arg-type]
    store.close()


def test_a_change_carried_onto_the_line_makes_the_carried_node_the_latest(tmp_path: Path) -> None:
    store, ids = _store(tmp_path / "evodag.sqlite")
    carried = {"carried": {"node": ids["line"], "onto": ids["a"], "held": False}}
    _iteration(store, 1, ids["base"], ids["b"], "accepted", finish_order=1, started_after=0, evidence=carried)
    ctx = SimpleNamespace(store=store)
    assert flights.latest_kept(ctx, store.iterations(), store.get_node(ids["base"])).id == ids["line"]  # type: ignore[arg-type]
    held = {"carried": {"node": None, "onto": ids["a"], "held": True}}
    _iteration(store, 2, ids["base"], ids["c"], "accepted", finish_order=2, started_after=1, evidence=held)
    assert flights.latest_kept(ctx, store.iterations(), store.get_node(ids["base"])).id == ids["a"]  # type: ignore[arg-type]
    store.close()


def test_the_stall_count_reads_the_decisions_in_finish_order(tmp_path: Path) -> None:
    store, ids = _store(tmp_path / "evodag.sqlite")
    _iteration(store, 1, ids["base"], ids["a"], "accepted", finish_order=3)
    _iteration(store, 2, ids["base"], ids["b"], "rejected", finish_order=1)
    _iteration(store, 3, ids["base"], ids["c"], "rejected", finish_order=2)
    assert flights.stalls(store.iterations()) == 0  # by number it would be 2: the accept finished last
    store.close()


def test_diagnoses_answer_in_the_order_their_iterations_started() -> None:
    hub = Hub(virtual=True)
    order = flights.DiagnosisOrder(hub)
    log: list[str] = []

    def iteration(number: int, evaluating: float) -> None:
        hub.sleep(evaluating)  # its parent's batch
        order.wait_turn(number)
        log.append(f"diagnosis {number} at {hub.now():.0f}")
        hub.sleep(10.0)
        order.answered(number)

    def main() -> None:
        for number in (1, 2, 3):
            order.started(number)
        hub.gather(lambda: iteration(1, 50.0), lambda: iteration(2, 5.0), lambda: iteration(3, 1.0))

    hub.run(main)
    assert log == ["diagnosis 1 at 50", "diagnosis 2 at 60", "diagnosis 3 at 70"]


def test_the_curriculum_leaves_a_failure_held_in_flight_to_its_iteration() -> None:
    sampler = CurriculumSampler([f"t{i}" for i in range(12)], 4, seed=1, unseen_share=0.0)
    failing = {"t0": "tools.py :: a", "t1": "tools.py :: a", "t2": "loop.py :: b", "t3": "loop.py :: b"}
    seen = frozenset(f"t{i}" for i in range(12))
    free = SamplerState(shown=12, seen=seen, failing=failing)
    held = SamplerState(shown=12, seen=seen, failing=failing, in_flight=frozenset({"t0"}))
    for index in range(10):
        batch = held.in_flight.isdisjoint(sampler.batch(index, held)[1][:2])
        assert batch, "the arm an iteration in flight holds is left to it"
    assert {"t0", "t1"} & set(sampler.batch(0, free)[1][:2]) or {"t2", "t3"} & set(sampler.batch(0, free)[1][:2])
    only = SamplerState(shown=12, seen=seen, failing={"t0": "x"}, in_flight=frozenset({"t0"}))
    assert sampler.batch(0, only)[1][0] == "t0"  # no other arm: the held one is drawn

"""Real GEPA in the strategy bench (bench/gepa_strategy.py): its rollouts are counted as saddler counts every run's,
test is evaluated on the test split only and after the search, the proposer sees train evidence only, and the same
seed gives the same figures. Needs the optional `bench` extra (scripts/test.sh installs it)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest
from repo_paths import REPO

pytest.importorskip("gepa", exc_type=ModuleNotFoundError)

from evodag.store import EvoDAG
from saddler.benchmark import load_benchmark

sys.path.insert(0, str(REPO / "bench"))
import gepa_adapter
import gepa_strategy
import strategies

BUDGET = 60  # the seed candidate on dev (40) and an iteration or two
TRAIN = {t.id for t in load_benchmark("opsdesk", {}).tasks("train")}


def _run(tmp_path: Path, name: str, phases: bool, pool: bool = True) -> gepa_strategy.GepaOutcome:
    sets = {"executor": {"cache": str(tmp_path / "cache.sqlite")}, "loop": {"test_runs": 1}}
    return gepa_strategy.run_gepa(
        tmp_path / name, template="opsdesk", seed=3, budget=BUDGET, phases=phases, overrides=sets, pool_on_test=pool
    )


def _figures(outcome: gepa_strategy.GepaOutcome) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(outcome).items() if k not in ("wall_s", "executed")}


def test_gepa_counts_rollouts_as_saddler_does_and_sees_test_only_after_the_search(tmp_path: Path) -> None:
    first = _run(tmp_path, "a", phases=True)
    with EvoDAG(tmp_path / "a" / "evodag.sqlite", readonly=True) as store:
        rows = sorted(store.rollouts(), key=lambda r: r.id)
        proposals = [e.payload for e in store.events(kind="gepa.proposal")]
        pool = [n for n in store.nodes() if n.status in ("baseline", "accepted")]
        run = store.get_run()
    search = [r for r in rows if r.split != "test"]
    tested = [r for r in rows if r.split == "test"]
    # every rollout GEPA was charged is one the store gained (executed, or served from a cache), and no more
    assert first.spent == first.metric_calls == len(search) >= BUDGET
    assert len({(r.node_id, r.cache_key) for r in search}) == len(search)  # a re-read rollout is not charged again
    assert 0 < first.executed <= first.spent
    assert first.spent - BUDGET < 2 * 6 + 40  # overshoot: at most one iteration (parent, child, dev of the child)
    # test: only after the search, only the test split, only for the baseline, the returned node and the pool
    assert {r.split for r in search} == {"train", "dev"}
    assert max(r.id for r in search) < min(r.id for r in tested)
    tasks = {t.id for t in load_benchmark("opsdesk", {}).tasks("test")}
    assert {r.task_id for r in tested} == tasks and {r.node_id for r in tested} == {n.id for n in pool}
    assert first.test_spent + first.pool_test_rollouts == len(tested) == len(tasks) * len(pool)
    assert len(first.pool_tests) == first.accepted + 1 and run.best_node_id in {n.id for n in pool}
    # the proposer was shown train tasks only, in the capability phase (40 train tasks x 2 epochs not yet shown,
    # nothing stalled, no batch pointing at steering files only)
    assert proposals and all(set(p["evidence_tasks"]) <= TRAIN for p in proposals)
    assert {(p["phase"], tuple(p["allowed_kinds"]), p["phase_moved"]) for p in proposals} == {
        ("capability", ("capability",), None)
    }
    # every GEPA iteration has a decision in saddler's words (what the phase schedule's stall rule reads)
    assert "None" not in first.decisions and first.decisions.get("accepted", 0) == first.accepted
    assert first.decisions.get("no_patch", 0) == first.blocked and sum(first.decisions.values()) >= len(proposals)

    again = _run(tmp_path, "b", phases=True)  # the same seed: the same figures, every rollout from the cache
    assert again.executed == 0
    assert _figures(again) == _figures(first)


def test_without_phases_every_kind_is_allowed_and_the_bench_reads_the_fields_of_every_strategy(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "off", phases=False, pool=False)
    with EvoDAG(tmp_path / "off" / "evodag.sqlite", readonly=True) as store:
        proposals = [e.payload for e in store.events(kind="gepa.proposal")]
    assert {(p["phase"], tuple(p["allowed_kinds"])) for p in proposals} == {("none", ("capability", "steering"))}
    assert outcome.pool_tests == [] and outcome.pool_test_rollouts == 0
    result = strategies.SeedResult(**outcome.seed_fields())
    assert (result.spent, result.test, result.seed) == (outcome.spent, outcome.test, 3)


def test_the_schedule_reads_gepa_events_as_saddler_counts_shown_tasks_and_decisions() -> None:
    from gepa.core.callbacks import CandidateRejectedEvent, EvaluationSkippedEvent, MinibatchSampledEvent

    schedule, item = gepa_adapter.Schedule(), gepa_adapter.Item
    schedule.on_minibatch_sampled(MinibatchSampledEvent(iteration=1, minibatch_ids=[item("train", "a"),
                                                        item("train", "b")], trainset_size=40))  # fmt: skip
    schedule.on_candidate_rejected(CandidateRejectedEvent(iteration=1, old_score=1, new_score=1, reason="tie"))
    schedule.on_minibatch_sampled(MinibatchSampledEvent(iteration=2, minibatch_ids=[item("train", "a"),
                                                        item("train", "c")], trainset_size=40))  # fmt: skip
    schedule.on_evaluation_skipped(EvaluationSkippedEvent(iteration=2, candidate_idx=0, reason="all_scores_perfect",
                                                          scores=[1.0, 1.0], is_seed_candidate=True))  # fmt: skip
    schedule.on_minibatch_sampled(MinibatchSampledEvent(iteration=3, minibatch_ids=[item("train", "d")],
                                                        trainset_size=40))  # fmt: skip
    assert (schedule.iteration, schedule.before, schedule.saturated) == (3, (4, 3), 1)
    assert schedule.decided_before(3) == ["rejected", "no_training_failures"]


def test_within_2pts_and_reach_follow_the_pool_in_gepa_order() -> None:
    assert gepa_strategy._reach([40, 92, 150], [0.5, 0.75, 0.8]) == 92  # 0.75 >= 0.9 x 0.8 first at 92
    assert gepa_strategy._reach([40, 92], [0.5, 0.5]) == 40
    base = gepa_strategy.GepaOutcome(seed=0, test=0.80, baseline_test=0.5, spent=1, test_spent=1, returned_dev=0.8,
                                     reach=1, capability_in_returned=0, saturated=0, blocked=0, accepted=1)  # fmt: skip
    assert dataclasses.replace(base, pool_tests=[0.5, 0.8199]).within_2pts_of_dag_best
    assert not dataclasses.replace(base, pool_tests=[0.5, 0.83]).within_2pts_of_dag_best


def test_a_session_cap_ends_gepa_after_that_many_proposals_and_reuse_needs_the_same_cap(tmp_path: Path) -> None:
    sets = {"executor": {"cache": str(tmp_path / "cache.sqlite")}, "loop": {"test_runs": 1}}
    capped = gepa_strategy.bench_seed("gepa_sessions", 3, 400, tmp_path, tmp_path / "cache.sqlite", False,
                                      overrides=sets, sessions=2)  # fmt: skip
    with EvoDAG(tmp_path / "gepa_sessions-s3" / "evodag.sqlite", readonly=True) as store:
        sessions = store.sessions()
    # each proposal is one LLM session, the only kind GEPA calls: the cap is on what an LLM backend bills
    assert capped.proposals == len(sessions) == 2 and {s.role for s in sessions} == {"diagnosis_patch"}
    assert (capped.stopped, capped.session_cap, capped.budget) == ("max_proposals", 2, 400)
    assert capped.spent < 400  # the cap, not the rollout budget, ended it
    again = gepa_strategy.bench_seed("gepa_sessions", 3, 400, tmp_path, tmp_path / "cache.sqlite", True,
                                     overrides=sets, sessions=2)  # fmt: skip
    assert _figures(again) == _figures(capped)  # read back: same budget, same cap
    wider = gepa_strategy.bench_seed("gepa_sessions", 3, 400, tmp_path, tmp_path / "cache.sqlite", True,
                                     overrides=sets, sessions=3)  # fmt: skip
    assert wider.session_cap == 3 and wider.proposals == 3  # another cap is another run, never a stale read


def test_the_uncapped_variants_take_no_session_cap(tmp_path: Path) -> None:
    assert not gepa_strategy.VARIANTS["gepa"].equal_sessions and gepa_strategy.VARIANTS["gepa_phases"].phases
    assert set(gepa_strategy.VARIANTS) == set(strategies.GEPA)
    assert {n for n, v in gepa_strategy.VARIANTS.items() if v.equal_sessions} == {
        "gepa_sessions",
        "gepa_phases_sessions",
    }

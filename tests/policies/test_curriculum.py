"""The curriculum sampler (failure-pattern arms, softmax pull, unseen draws) and the full_coverage phase
transition, as pure policies."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saddler.config import PolicyConfig, parse_saddler_file
from saddler.errors import ConfigError
from saddler.policies import make_phase_schedule, make_sampler
from saddler.policies.curriculum import CurriculumSampler, arm_values, softmax
from saddler.policies.sampler import SamplerState

IDS = [f"t{i:02d}" for i in range(12)]


def curriculum(size: int = 6, seed: int = 0, **kw: float) -> CurriculumSampler:
    sampler = make_sampler("curriculum", IDS, size, seed, **kw)
    assert isinstance(sampler, CurriculumSampler) and sampler.adaptive
    return sampler


def shown(*batches: list[str]) -> SamplerState:
    last = {t: i for i, b in enumerate(batches) for t in b}
    return SamplerState(shown=sum(map(len, batches)), seen=frozenset(last), last_shown=last)


def test_cold_start_draws_unseen_tasks_and_covers_the_split_without_repeats() -> None:
    sampler = curriculum(size=5)
    batches: list[list[str]] = []
    for index in range(3):
        epoch, batch = sampler.batch(index, shown(*batches))
        assert epoch == sum(map(len, batches)) // len(IDS)
        batches.append(batch)
    assert [len(b) for b in batches] == [5, 5, 5]
    flat = [t for b in batches for t in b]
    assert set(flat) == set(IDS) and len(set(flat[:12])) == 12  # every task once before any repeat
    assert sampler.batch(0) == curriculum(size=5).batch(0, SamplerState())  # None is the empty state
    assert sampler.batch(0) != curriculum(size=5, seed=1).batch(0)


def test_a_pull_takes_failing_tasks_of_one_arm_plus_the_unseen_share() -> None:
    sampler = curriculum(size=6)
    first = sampler.batch(0)[1]
    failing = {t: "tools/cal.py :: event_time" for t in first[:4]} | {first[4]: "loop.py :: answer"}
    state = SamplerState(shown=6, seen=frozenset(first), last_shown=dict.fromkeys(first, 0), failing=failing)
    _, batch = sampler.batch(1, state)
    assert len(batch) == len(set(batch)) == 6
    unseen = [t for t in batch if t not in first]
    assert len(unseen) == round(6 * 0.34) == 2
    assert set(batch) - set(unseen) <= set(failing)  # the rest are known failures, pulled arm first
    assert sampler.batch(1, state) == (0, batch)  # deterministic for the same index and state


def test_arm_probabilities_follow_breadth_and_cool_down_with_tries() -> None:
    arms = {"a": ["t1", "t2", "t3"], "b": ["t4"]}
    assert arm_values(arms) == {"a": (0.75 + 1.0) / 2, "b": (0.25 + 1.0) / 2}
    cooled = arm_values(arms, {"t1": 3, "t2": 3, "t3": 3})
    assert cooled == {"a": (0.75 + 0.25) / 2, "b": (0.25 + 1.0) / 2}
    probs = softmax(cooled, 0.15)
    assert math.isclose(sum(probs.values()), 1.0)
    assert math.isclose(probs["b"] / probs["a"], math.exp((0.625 - 0.5) / 0.15))
    assert softmax({}, 1.0) == {}


def test_pulls_follow_the_softmax_over_many_iterations() -> None:
    sampler = curriculum(size=2, unseen_share=0.0)
    failing = {t: ("big" if i < 6 else "small") for i, t in enumerate(IDS[:8])}
    state = SamplerState(shown=12, seen=frozenset(IDS), last_shown=dict.fromkeys(IDS, 0), failing=failing)
    probs = sampler.probabilities(state)
    counts = Counter("big" if failing[sampler.batch(i, state)[1][0]] == "big" else "small" for i in range(2000))
    assert abs(counts["big"] / 2000 - probs["big"]) < 0.03  # seeded: the same counts every time


def test_once_every_task_was_shown_the_draw_share_revisits_the_least_recent_passing_tasks() -> None:
    sampler = curriculum(size=6)
    last = {t: i // 6 for i, t in enumerate(IDS)}  # t00..t05 shown at iteration 0, t06..t11 at 1
    failing = {"t07": "x :: y", "t08": "x :: y", "t09": "x :: y", "t10": "x :: y"}
    state = SamplerState(shown=12, seen=frozenset(IDS), last_shown=last, failing=failing)
    _, batch = sampler.batch(2, state)
    assert sorted(batch[:4]) == ["t07", "t08", "t09", "t10"]
    assert set(batch[4:]) <= {f"t0{i}" for i in range(6)}  # revisits come from the least recently shown


def test_with_every_task_failing_and_seen_the_batch_is_all_failures() -> None:
    sampler = curriculum(size=6)
    failing = {t: f"f :: c{i % 3}" for i, t in enumerate(IDS)}
    state = SamplerState(shown=24, seen=frozenset(IDS), last_shown=dict.fromkeys(IDS, 1), failing=failing)
    epoch, batch = sampler.batch(4, state)
    assert epoch == 2 and len(set(batch)) == 6 and set(batch) <= set(IDS)


@given(
    st.integers(1, 12),
    st.integers(0, 50),
    st.sets(st.sampled_from(IDS)),
    st.dictionaries(st.sampled_from(IDS), st.sampled_from(["a :: x", "b :: y", "c :: z"])),
    st.floats(0.0, 1.0),
)
def test_any_state_gives_a_full_batch_of_distinct_train_tasks(
    size: int, index: int, seen: set[str], failing: dict[str, str], share: float
) -> None:
    sampler = curriculum(size=size, unseen_share=share)
    state = SamplerState(shown=len(seen), seen=frozenset(seen), last_shown=dict.fromkeys(seen, 0),
                         failing=failing | {"not-a-train-task": "z :: z"})  # fmt: skip
    _, batch = sampler.batch(index, state)
    assert len(batch) == len(set(batch)) == size and set(batch) <= set(IDS)
    assert sampler.batch(index, state) == (state.shown // 12, batch)


def test_full_coverage_phase_waits_for_every_task() -> None:
    coverage = make_phase_schedule("capability_then_steering", 10, 1.0, False, "full_coverage")
    assert coverage.phase(25, 9) == "capability" and coverage.phase(10, 10) == "steering"
    assert coverage.phase(9) == "capability" and coverage.phase(10) == "steering"  # epoch samplers: distinct = shown
    epochs = make_phase_schedule("capability_then_steering", 10, 1.0, False)
    assert epochs.phase(10, 4) == "steering"  # one epoch of shows, however few distinct tasks
    assert make_phase_schedule("none", 10, 1.0, False, "full_coverage").phase(0, 0) == "none"


def test_curriculum_and_phase_transition_settings_are_validated() -> None:
    cfg = PolicyConfig.model_validate({"sampler": "curriculum", "phase_transition": "full_coverage",
                                       "curriculum": {"temperature": 0.5, "unseen_share": 0.5}})  # fmt: skip
    assert (cfg.sampler, cfg.phase_transition, cfg.curriculum.temperature) == ("curriculum", "full_coverage", 0.5)
    with pytest.raises(ConfigError) as err:
        parse_saddler_file({"run": {"policies": {"curriculum": {"temperature": 0, "share": 1}}}})
    text = str(err.value)
    assert "run.policies.curriculum.temperature" in text and "run.policies.curriculum.share" in text

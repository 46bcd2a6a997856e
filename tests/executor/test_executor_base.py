"""The executor contract: jobs survive JSON round-trips; the cache key is a pure function of its identity."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from saddler.benchmark import RolloutResult, Task
from saddler.executor.base import RolloutJob, rollout_cache_key

text = st.text(max_size=20)
tasks = st.builds(Task, id=text, group=text, split=st.sampled_from(["train", "dev", "test"]), family=text, prompt=text)
jobs = st.builds(
    RolloutJob,
    benchmark=text,
    benchmark_options=st.dictionaries(text, st.integers() | text | st.booleans(), max_size=3),
    harness_dir=text,
    commit=text,
    tree=text,
    task=tasks,
    split=st.sampled_from(["train", "dev", "test"]),
    seed=st.integers(0, 2**32),
    repetition=st.integers(0, 10),
    trace_dir=text,
    cache_key=text,
    extra=st.dictionaries(text, st.floats(allow_nan=False) | text, max_size=3),
)


@given(jobs)
def test_job_json_round_trip(job: RolloutJob) -> None:
    assert RolloutJob.from_json(job.to_json()) == job


@given(
    st.builds(
        RolloutResult,
        task_id=text,
        score=st.floats(0, 1),
        passed=st.booleans(),
        disposition=st.sampled_from(["success", "task_failure", "infra_error", "timeout"]),
        duration_s=st.floats(0, 1e4),
        trace_path=st.none() | text,
        error_tail=text,
    )
)
def test_result_dict_round_trip(result: RolloutResult) -> None:
    assert RolloutResult.from_dict({**result.to_dict(), "unknown_field": 1}) == result


identity = st.tuples(text, text, st.sampled_from(["train", "dev"]), st.integers(0, 99), st.integers(0, 3), text, text)


@given(identity, identity)
def test_cache_key_is_equal_exactly_when_identity_is(a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    assert (rollout_cache_key(*a) == rollout_cache_key(*b)) == (a == b)
    assert len(rollout_cache_key(*a)) == 32

"""What an executor runs: `RolloutJob`, and the rollout cache key. The `Executor` contract is in
`saddler.ports`: an executor runs `RolloutJob`s and calls `on_result(job, result)` once per job as each finishes
(from the calling thread). It never raises for a failing rollout: a crash, timeout or OOM becomes a
`RolloutResult` with disposition `infra_error` or `timeout` and the tail of stderr. It raises
`ExecutorError` only when it cannot run at all.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from saddler.benchmark import Task


@dataclass(frozen=True)
class RolloutJob:
    """Everything a worker needs to run one rollout, picklable and JSON-serialisable."""

    benchmark: str
    benchmark_options: dict[str, Any]
    harness_dir: str  # a checkout of `commit` (worktree or snapshot); never the user's original
    commit: str
    tree: str  # git tree hash of the harness: what the cache keys on
    task: Task
    split: str
    seed: int
    repetition: int
    trace_dir: str
    cache_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RolloutJob:
        data = json.loads(text)
        data["task"] = Task(**data["task"])
        return cls(**data)


def rollout_cache_key(
    tree: str, task_id: str, split: str, seed: int, repetition: int, bench_fp: str, model_fp: str
) -> str:
    """Identity of a rollout: (harness tree, task, split, seed, repetition, benchmark fp, task-model fp)."""
    raw = json.dumps([tree, task_id, split, seed, repetition, bench_fp, model_fp])
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


__all__ = ["RolloutJob", "rollout_cache_key"]

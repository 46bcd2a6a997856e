"""The benchmark contract and the registry of bundled benchmarks.

A `Benchmark` lists tasks per split and runs one task against a harness directory. A broken candidate
is data: `run` returns a `RolloutResult` with disposition `task_failure`/`infra_error`, it never raises
for a harness fault. This module is imported inside rollout child processes: keep it dependency-free.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Task:
    """One gradable scenario. `group` is its universe; splits are held out by group."""

    id: str
    group: str
    split: str  # train | dev | test
    family: str = ""  # task family (e.g. "schedule_meeting"), for per-family reports
    prompt: str = ""


@dataclass
class RolloutResult:
    """Outcome of one run of one task on one harness with one seed."""

    task_id: str
    score: float  # 0..1
    passed: bool
    disposition: str  # success | task_failure | infra_error | timeout
    cost: float = 0.0
    llm_calls: int = 0
    duration_s: float = 0.0
    trace_path: str | None = None
    error_tail: str = ""
    rationale: str = ""  # grader's reason on failure
    failure_file: str | None = None  # harness file (relative) where the trace's failure point lies

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutResult:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


@dataclass(frozen=True)
class Symptom:
    """A failure signature read from a trace: what the offline diagnosis reasons from."""

    code: str  # e.g. "pagination_truncated", "missing_tool:expenses", "finished_unverified"
    task_id: str
    file: str | None = None  # harness file implicated, if the trace shows it
    detail: str = ""


@dataclass(frozen=True)
class BankPatch:
    """A real diff against the benchmark's baseline harness, with what it is meant to fix."""

    id: str
    kind: str  # capability | steering
    subtype: str  # tool | loop | infra | prompt | reminder | hook
    symptoms: tuple[str, ...]  # symptom codes it addresses
    description: str
    diff: str  # unified diff, `git apply`-able at the harness root
    files: tuple[str, ...] = field(default=())


@runtime_checkable
class Benchmark(Protocol):
    """Contract every benchmark plugin meets.

    - `tasks(split)` is deterministic and never includes another split's groups.
    - `run(harness_dir, task, seed, trace_dir)` runs inside an isolated child process; it writes the
      trace under `trace_dir` and returns a `RolloutResult`; harness faults become failed results.
    - `fingerprint()` changes whenever environment, tasks or grader change;
      `model_fingerprint()` whenever the task model changes. Both enter the rollout cache key.
    - `symptoms(result)` and `patch_bank()` feed the offline backend; a benchmark without a bank
      returns `[]` and offline diagnosis then records a stall.
    """

    name: str

    def tasks(self, split: str) -> list[Task]: ...

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult: ...

    def fingerprint(self) -> str: ...

    def model_fingerprint(self) -> str: ...

    def symptoms(self, result: RolloutResult) -> list[Symptom]: ...

    def patch_bank(self) -> list[BankPatch]: ...


BENCHMARKS: dict[str, str] = {
    "opsdesk": "benchmarks.opsdesk:OpsdeskBenchmark",
    "skill-evals": "benchmarks.skill_evals:SkillEvalsBenchmark",
    "command": "benchmarks.command:CommandBenchmark",
    "claude-tasks": "benchmarks.claude_tasks:ClaudeTasksBenchmark",
}


def is_known_benchmark(name: str) -> bool:
    """A registered short name, or a `package.module:Class` path to the user's own plugin."""
    return name in BENCHMARKS or (":" in name and all(name.partition(":")[::2]))


def load_benchmark(name: str, options: dict[str, Any] | None = None) -> Benchmark:
    """Import the benchmark registered under `name` (or given as `module:Class`) lazily; build it with `options`."""
    if not is_known_benchmark(name):
        from saddler.errors import UnknownNameError

        raise UnknownNameError("benchmark", name, [*BENCHMARKS, "package.module:Class"])
    module_name, _, attr = BENCHMARKS.get(name, name).partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    return cls(**(options or {}))

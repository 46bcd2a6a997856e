"""The benchmark contract, in one place: the data types, the Protocol, a base class with defaults, the registry.

A plugin needs only `tasks(split)` and `run(harness_dir, task, seed, trace_dir)`; everything else the optimizer
asks of a benchmark has a default in `BenchmarkBase`, and `load_benchmark` fills those defaults in on a plugin
that does not subclass it. A broken candidate is data: `run` returns a `RolloutResult` with disposition
`task_failure`/`infra_error`, it never raises for a harness fault. Benchmarks are found by short name (the bundled
ones, then the `saddler.benchmarks` entry-point group), or as `package.module:Class`.

This module is imported inside rollout child processes: keep it dependency-free.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
import types
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evodag.metric import MetricScale  # the store records a run's metric and renders it: it lives there

SCORE_KINDS = ("pass_rate", "mean_score")
SPLITS = ("train", "dev", "test")
ENTRY_POINT_GROUP = "saddler.benchmarks"


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
    trace_path: str | None = None  # a file or the rollout's trace folder; None: the folder, if anything is in it
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


@dataclass(frozen=True)
class AuditString:
    """A string a harness has no business containing (the cheat audit, `saddler.policies.audit`): `text`, what it
    is (`what`: "expected answer", "grader string", "evaluation file", …) and the task it belongs to (`task_id`;
    '' for the benchmark's own, e.g. a grader message). A task's string is never shown to a session when the task
    is dev or test; a benchmark-wide string may be shown, so it must not be held-out data."""

    text: str
    what: str
    task_id: str = ""


@dataclass(frozen=True)
class RolloutNeeds:
    """What a benchmark's rollouts need from `[run.executor]`: the network (they call a model's API from the
    rollout), the environment variables they cannot run without (`env`: a key) and those they read when set
    (`optional_env`: a provider's base URL). `why` says it in a few words ("the task model openai/gpt-4o")."""

    network: bool = False
    env: tuple[str, ...] = ()
    optional_env: tuple[str, ...] = ()
    why: str = ""


PROVIDER_ENV: dict[str, tuple[str, str]] = {
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "google": ("GOOGLE_API_KEY", "GOOGLE_BASE_URL"),
    "mistral": ("MISTRAL_API_KEY", "MISTRAL_BASE_URL"),
    "grok": ("XAI_API_KEY", "GROK_BASE_URL"),
    "groq": ("GROQ_API_KEY", "GROQ_BASE_URL"),
    "together": ("TOGETHER_API_KEY", "TOGETHER_BASE_URL"),
}
"""Model provider (the `provider/` of a model name, as Inspect and LiteLLM write it) -> (its API key variable, its
base URL variable: point it at an OpenAI-compatible or proxy server)."""


def model_needs(model: str) -> RolloutNeeds:
    """What rollouts that call `model` need: the network, its provider's key and (when set) its base URL. An
    `openai-api/<service>/<model>` name reads `<SERVICE>_API_KEY` and `<SERVICE>_BASE_URL`; `mockllm/...` and an
    unknown provider need nothing saddler can name."""
    provider, _, rest = model.partition("/")
    if provider == "openai-api" and "/" in rest:
        service = rest.partition("/")[0].upper().replace("-", "_")
        key, base = f"{service}_API_KEY", f"{service}_BASE_URL"
    elif provider in PROVIDER_ENV:
        key, base = PROVIDER_ENV[provider]
    else:
        return RolloutNeeds()
    return RolloutNeeds(True, (key,), (base,), f"the task model {model} is called from each rollout")


@runtime_checkable
class Benchmark(Protocol):
    """Everything the optimizer asks of a benchmark (`BenchmarkBase` gives the defaults).

    - `tasks(split)` is deterministic and never includes another split's groups.
    - `run(harness_dir, task, seed, trace_dir)` runs inside an isolated child process; `trace_dir` is this
      rollout's own folder (no other rollout writes there); it returns a `RolloutResult`; harness faults
      become failed results.
    - `fingerprint()` changes whenever environment, tasks or grader change; `model_fingerprint()` whenever
      the task model changes. Both enter the rollout cache key.
    - `symptoms(result)` and `patch_bank()` feed the offline backend; a benchmark without a bank returns `[]`
      and offline diagnosis then records a stall.
    - `trace_format` tells diagnosis what the traces are (one or two sentences).
    - `score_kind` is the per-task score `policies.score = "auto"` uses: `pass_rate` (share of repetitions
      passed; dev/test are Pass@1) or `mean_score` (mean graded score; partial credit counts).
    - `metric` is the benchmark's own metric behind the score, when it has one (reports show it).
    - `check()` lists what is missing on this machine to run it (`saddler doctor` shows it); `[]` when ready.
    - `rollout_needs()` says whether its rollouts need the network and which environment variables: `init` sets
      them in `[run.executor]`, `validate` and `doctor` flag what is missing (`RolloutNeeds()`: nothing).

    Two optional members feed the cheat audit (`saddler.policies.audit`; `BenchmarkBase` gives `[]` for both):
    - `audit_strings(tasks)`: `AuditString`s of those tasks a candidate's diff must not add (expected answers,
      grader messages, evaluation file names), beyond the task ids the audit always checks.
    - `trace_reads(result)`: the evaluation or protected files (the grader, the tasks, hidden tests) the
      rollout's harness code read, as its trace records them; `[]` when the benchmark records no reads.
    """

    name: str
    trace_format: str
    score_kind: str
    metric: MetricScale | None

    def tasks(self, split: str) -> list[Task]: ...

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult: ...

    def fingerprint(self) -> str: ...

    def model_fingerprint(self) -> str: ...

    def symptoms(self, result: RolloutResult) -> list[Symptom]: ...

    def patch_bank(self) -> list[BankPatch]: ...

    def check(self) -> list[str]: ...

    def rollout_needs(self) -> RolloutNeeds: ...


@dataclass(frozen=True)
class BatchRollout:
    """One rollout of a `Batch`: the task, its seed and repetition, and its own trace folder."""

    task: Task
    seed: int
    repetition: int
    trace_dir: Path


@dataclass(frozen=True)
class Batch:
    """An evaluation batch handed to `BatchBenchmark.run_batch`: the candidate's harness (a read-only snapshot),
    the rollouts still missing, a folder of the batch's own (for a job's files), how many rollouts may run at
    once (`executor.workers`), the rollout environment (`executor.env_allow`, scrubbed as for a rollout) and the
    time one rollout may take (`executor.timeout_s`)."""

    harness_dir: Path
    rollouts: tuple[BatchRollout, ...]
    folder: Path
    workers: int
    env: dict[str, str]
    timeout_s: float


@runtime_checkable
class BatchBenchmark(Protocol):
    """Optional: a benchmark that runs a whole evaluation batch itself, as one job of an outside runner (Harbor:
    one `harbor run` for every task and repetition). Without it, each rollout is one `run` in the executor.

    `run_batch(batch, on_result)` is called in the optimizer's process: it starts the candidate's code only in
    processes of its own, with `batch.env`, and puts each rollout's files in its `trace_dir`. It calls
    `on_result(rollout, result)` once per rollout of the batch, from the calling thread, as each result lands
    (it is stored at once: a batch killed half-way is resumed with only the rollouts still missing), gives a
    rollout it could not run an `infra_error` (or `timeout`) result, and returns when every rollout has one.
    """

    def run_batch(self, batch: Batch, on_result: Callable[[BatchRollout, RolloutResult], None]) -> None: ...


class BenchmarkBase:
    """Defaults for every `Benchmark` member but `tasks` and `run`; subclass it, or let `load_benchmark` add them."""

    name = ""
    trace_format = "not declared by the benchmark: read the files in each rollout's trace folder"
    score_kind = "pass_rate"
    metric: MetricScale | None = None

    def tasks(self, split: str) -> list[Task]:
        raise NotImplementedError(f"{type(self).__name__} must define tasks(split)")

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        raise NotImplementedError(f"{type(self).__name__} must define run(harness_dir, task, seed, trace_dir)")

    def fingerprint(self) -> str:
        """Digest of the plugin class's source module and its instance attributes: editing the benchmark's
        code or options invalidates cached rollouts."""
        return default_fingerprint(self)

    def model_fingerprint(self) -> str:
        return "none"

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        return []

    def patch_bank(self) -> list[BankPatch]:
        return []

    def check(self) -> list[str]:
        return []

    def rollout_needs(self) -> RolloutNeeds:
        return RolloutNeeds()

    def audit_strings(self, tasks: list[Task]) -> list[AuditString]:
        return []

    def trace_reads(self, result: RolloutResult) -> list[str]:
        return []


def default_fingerprint(bench: object) -> str:
    """sha256 (16 hex) over the class's qualified name, its module's source and `vars(bench)` as JSON."""
    cls = type(bench)
    h = hashlib.sha256(f"{cls.__module__}.{cls.__qualname__}".encode())
    source = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if source and Path(source).is_file():
        h.update(Path(source).read_bytes())
    h.update(json.dumps(getattr(bench, "__dict__", {}), sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def hashed_split(name: str, ratios: list[float]) -> str:
    """The split ("train", "dev" or "test") a task or group called `name` falls in, for `ratios` (three weights in
    that order): a stable hash of the name, so the same name lands in the same split on every machine and run."""
    point = int(hashlib.sha256(f"saddler-split:{name}".encode()).hexdigest()[:12], 16) / float(16**12)
    total, edge = sum(ratios), 0.0
    for split, ratio in zip(SPLITS, ratios, strict=True):
        edge += ratio / total
        if point < edge:
            return split
    return SPLITS[-1]


_DEFAULTS = (
    "fingerprint", "model_fingerprint", "symptoms", "patch_bank", "check", "rollout_needs", "audit_strings",
    "trace_reads",
)  # fmt: skip
_DEFAULT_ATTRS = ("trace_format", "score_kind", "metric")


def complete(plugin: Any) -> Benchmark:
    """`plugin` with every `Benchmark` member it lacks taken from `BenchmarkBase` (set on the instance, so its
    type and module stay the plugin's own). A plugin without `tasks` or `run` is a `ConfigError`."""
    from saddler.errors import ConfigError

    missing = [m for m in ("tasks", "run") if not callable(getattr(plugin, m, None))]
    if missing:
        raise ConfigError(
            f"benchmark {type(plugin).__name__} lacks {' and '.join(missing)}: a plugin defines tasks(split) and "
            "run(harness_dir, task, seed, trace_dir) (see the README)"
        )
    for name in _DEFAULTS:
        if not callable(getattr(plugin, name, None)):
            setattr(plugin, name, types.MethodType(getattr(BenchmarkBase, name), plugin))
    for name in _DEFAULT_ATTRS:
        if not hasattr(plugin, name):
            setattr(plugin, name, getattr(BenchmarkBase, name))
    if not getattr(plugin, "name", ""):
        plugin.name = type(plugin).__name__
    if plugin.score_kind not in SCORE_KINDS:
        raise ConfigError(f"benchmark {plugin.name}: score_kind must be one of {', '.join(SCORE_KINDS)}")
    return plugin


# the registry -------------------------------------------------------------------------------------------------

BENCHMARKS: dict[str, str] = {
    "opsdesk": "benchmarks.opsdesk:OpsdeskBenchmark",
    "repofix": "benchmarks.repofix:RepofixBenchmark",
    "skill-evals": "benchmarks.skill_evals:SkillEvalsBenchmark",
    "command": "benchmarks.command:CommandBenchmark",
    "claude-tasks": "benchmarks.claude_tasks:ClaudeTasksBenchmark",
    "inspect": "benchmarks.inspect:InspectBenchmark",
    "harbor": "benchmarks.harbor:HarborBenchmark",
}
"""The bundled benchmarks: short name -> `module:Class`."""


def entry_point_benchmarks() -> dict[str, str]:
    """Benchmarks installed packages register under `[project.entry-points."saddler.benchmarks"]` (name ->
    `module:attr`), read from package metadata without importing anything. Bundled names win a clash."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BENCHMARKS}


def registered_benchmarks() -> dict[str, str]:
    """Every short name (bundled, then entry points) -> `module:Class`."""
    return {**BENCHMARKS, **entry_point_benchmarks()}


def benchmark_target(name: str) -> str:
    """The `module:Class` a benchmark name stands for (`name` itself when it is already one); '' if unknown."""
    if name in BENCHMARKS:
        return BENCHMARKS[name]
    if ":" in name and all(name.partition(":")[::2]):
        return name
    return entry_point_benchmarks().get(name, "")


def is_known_benchmark(name: str) -> bool:
    """A bundled or entry-point short name, or a `package.module:Class` path to the user's own plugin."""
    return bool(benchmark_target(name))


def build_benchmark(name: str, options: dict[str, Any] | None = None) -> Any:
    """Import the class `name` stands for (lazily, only now) and build it with `options`, as it is."""
    target = benchmark_target(name)
    if not target:
        from saddler.errors import UnknownNameError

        raise UnknownNameError("benchmark", name, [*registered_benchmarks(), "package.module:Class"])
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    return cls(**(options or {}))


def load_benchmark(name: str, options: dict[str, Any] | None = None) -> Benchmark:
    """The benchmark registered under `name` (or given as `module:Class`), built with `options`, defaults filled."""
    return complete(build_benchmark(name, options))

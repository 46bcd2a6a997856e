"""The plug points of saddler, as Protocols, in one place.

Each port names the contract a replaceable part must meet; the concrete parts live in their own
packages and are chosen by name in the config:

| port | implementations | chosen by |
|---|---|---|
| `Benchmark` (`saddler.benchmark`) | `benchmarks/*`, or `package.module:Class`, or an entry point | `run.benchmark` |
| `SessionBackend` | `saddler.sessions.{offline,claude,command}` | `run.sessions.backend` |
| `Executor` | `saddler.executor.{local,ray_executor}` | `run.executor.kind` |
| `BatchSampler` | `saddler.policies.sampler` | `run.policies.sampler` |
| `Progress` | `saddler.reporting.progress` | `--quiet` / a terminal |

Importing this module is cheap: the request/result types are only imported for type checking.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from saddler.benchmark import Benchmark, RolloutResult

if TYPE_CHECKING:
    from saddler.executor.base import RolloutJob
    from saddler.policies.sampler import SamplerState
    from saddler.sessions.schema import (
        DiagnosisRequest,
        DiagnosisResult,
        EvolutionRequest,
        EvolutionResult,
        ReflectionRequest,
        ReflectionResult,
    )

__all__ = ["BatchSampler", "Benchmark", "Executor", "Progress", "ResultCallback", "SessionBackend"]


class SessionBackend(Protocol):
    """One method per optimizer session kind; each returns a validated result.

    Contract: a backend never raises for a bad session (budget, max turns, unparsable output): it returns
    a result with status/outcome `failed:<reason>`. It raises `AuthenticationError` when credentials are
    missing or rejected, and `BackendError` when it cannot run at all. `reads_history` says whether its sessions
    query the request's `db_path` (the session view, written before each such session); a backend without the
    attribute is taken to read it.
    """

    name: str
    reads_history: bool

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult: ...

    def reflect(self, request: ReflectionRequest) -> ReflectionResult: ...

    def evolve(self, request: EvolutionRequest) -> EvolutionResult: ...


ResultCallback = Callable[["RolloutJob", RolloutResult], None]


class Executor(Protocol):
    """Runs rollout jobs and calls `on_result(job, result)` once per job as each finishes (calling thread).

    It never raises for a failing rollout: a crash, timeout or OOM becomes a `RolloutResult` with
    disposition `infra_error` or `timeout` and the tail of stderr. It raises `ExecutorError` only when it
    cannot run at all. `close()` releases workers; calling it twice is harmless.
    """

    def run(self, jobs: Sequence[RolloutJob], on_result: ResultCallback) -> None: ...

    def close(self) -> None: ...


class BatchSampler(Protocol):
    """Draws the train mini-batch of each iteration.

    `batch(index, state)` returns (epoch, task ids) for iteration `index` (0-based) and is a pure function of
    the sampler's inputs and `state` (what the store said before the iteration), so the same run draws the same
    batches. `adaptive` says whether the sampler reads the failures in `state` (the loop builds them only then).
    """

    adaptive: bool

    def batch(self, index: int, state: SamplerState | None = None) -> tuple[int, list[str]]: ...


class Progress(Protocol):
    """What a long phase reports to: `start` a phase of `total` units, `advance`, `finish`; `note` a line. `extend`
    adds `n` units to the phase under way (starting one when none is), with a new label: the rollout pool's work
    grows while it runs."""

    def start(self, total: int, label: str) -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def extend(self, n: int, label: str) -> None: ...

    def finish(self) -> None: ...

    def note(self, text: str) -> None: ...

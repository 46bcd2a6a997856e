"""The base of the LLM backends (`claude`, `command`): one `_session(role, request)` per session kind, retries
with seeded backoff on transient errors, the usage-window error, transcript files, the effort check, and the Bash
policy that the claude backend's PreToolUse hook enforces (the post-hoc diff check stays the second line of
defence). Answers are parsed by `saddler.sessions.answers`; the worktree is checked by
`saddler.sessions.agent_edits`.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, get_args

from saddler.benchmark import Benchmark
from saddler.config import SessionConfig
from saddler.errors import ConfigError
from saddler.sessions import guard
from saddler.sessions.agent_edits import finish_diagnosis, head_commit, undo_agent_commits
from saddler.sessions.answers import Request, Result, failed_result
from saddler.sessions.schema import (
    DiagnosisRequest,
    DiagnosisResult,
    EvolutionRequest,
    EvolutionResult,
    ReflectionRequest,
    ReflectionResult,
    Role,
    SessionStats,
)

T = TypeVar("T")


def check_efforts(config: SessionConfig, efforts: tuple[str, ...], accepter: str) -> None:
    """Raise `ConfigError` when a role's effort is set to a value outside `efforts` (what `accepter` takes)."""
    for role in get_args(Role):
        effort = config.for_role(role).effort
        if effort and effort not in efforts:
            raise ConfigError(
                f"sessions effort {effort!r} ({role}) is not one {accepter} accepts: {', '.join(efforts)}"
            )


def transcript_path(run_dir: Path, iteration: int, role: str, attempt: int = 0) -> Path:
    """`run_dir/sessions/<iteration>-<role>.jsonl` (`<iteration>-<role>-<attempt>.jsonl` for a retry), its folder
    created: each paid attempt keeps its own transcript."""
    suffix = f"-{attempt}" if attempt else ""
    path = Path(run_dir) / "sessions" / f"{iteration}-{role}{suffix}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class Transcript:
    """Append-only JSONL transcript of one session (every attempt, every message)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.write_text("", encoding="utf-8")

    def write(self, kind: str, **data: Any) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"kind": kind, **data}, default=str, sort_keys=True) + "\n")


class TransientError(Exception):
    """A failure worth retrying (rate limit, overload, dropped connection)."""


class UsageLimitError(Exception):
    """The plan's usage window is used up: no call succeeds until `resets_at` (seconds since the epoch; None when
    the CLI did not say). Not retried by the backend: the loop waits for the window (`saddler.run.usage_window`)."""

    def __init__(self, message: str, resets_at: float | None) -> None:
        super().__init__(message)
        self.message, self.resets_at = message, resets_at


def with_retries(
    fn: Callable[[int], T],
    retries: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    base_delay: float = 2.0,
    max_delay: float = 60.0,
    on_retry: Callable[[int, Exception, float], None] | None = None,
) -> T:
    """Call `fn(attempt)`; on `TransientError` wait `base * 2**attempt` (plus seeded jitter) and retry,
    at most `retries` times; the last `TransientError` propagates."""
    rng = rng or random.Random(0)
    attempt = 0
    while True:
        try:
            return fn(attempt)
        except TransientError as exc:
            if attempt >= retries:
                raise
            delay = min(max_delay, base_delay * 2**attempt) * (1 + 0.25 * rng.random())
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            sleep(delay)
            attempt += 1


class LLMSessionBackend:
    """Shared shape of the LLM backends: each session kind is one `_session(role, request)` call.

    Diagnosis additionally undoes any commit the agent made itself (keeping its edits), so the loop
    commits and diffs the change, and checks the edit against the worktree (`finish_diagnosis`).
    Implements `saddler.ports.SessionBackend`.
    """

    name = "llm"
    reads_history = True  # its agents query the session view with `evo-dag`

    def __init__(
        self,
        config: SessionConfig,
        *,
        benchmark: Benchmark | None = None,
        run_dir: Path,
        seed: int,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.benchmark = benchmark
        self.run_dir = Path(run_dir)
        self.rng = random.Random(seed)
        self.sleep = sleep
        self.clock = clock
        self.wall_clock = wall_clock

    def now(self) -> dt.datetime:
        """The wall clock as an aware local datetime (usage-limit messages name local times)."""
        return dt.datetime.fromtimestamp(self.wall_clock()).astimezone()

    def use_fallback_model(self) -> bool:
        """Run every later session on `sessions.fallback_model` (the usage window of the model is used up); False
        when there is none or it is already in use."""
        fallback = self.config.fallback_model
        if not fallback or fallback == self.config.model:
            return False
        roles = self.config.roles.model_copy(
            update={r: getattr(self.config.roles, r).model_copy(update={"model": None}) for r in get_args(Role)}
        )
        self.config = self.config.model_copy(update={"model": fallback, "fallback_model": None, "roles": roles})
        return True

    def _session(self, role: Role, request: Request) -> Result:
        raise NotImplementedError

    def policy(self, request: Request) -> guard.BashPolicy:
        """The Bash policy of a session: the request's check command (diagnosis), else the configured one; `evo-dag`
        on the request's session view; reads inside the run folder limited to the request's `readable` paths."""
        check = (request.check_command if isinstance(request, DiagnosisRequest) else "") or self.config.check_command
        reads = guard.ReadPolicy(request.run_dir, tuple(request.readable))
        return guard.BashPolicy(check, request.db_path, reads)

    def _with_retries(
        self,
        role: Role,
        request: Request,
        stats: SessionStats,
        transcript: Transcript,
        attempt: Callable[[int], Result],
    ) -> Result:
        """Run `attempt` with backoff on transient errors; exhausted retries make a failed result. The result's
        `stats.cli_attempts` counts the runs."""

        def on_retry(n: int, exc: Exception, delay: float) -> None:
            transcript.write("retry", attempt=n, error=str(exc), delay_s=round(delay, 3))

        def counted(n: int) -> Result:
            stats.cli_attempts = n + 1
            return attempt(n)

        try:
            result = with_retries(counted, self.config.retries, sleep=self.sleep, rng=self.rng, on_retry=on_retry)
        except TransientError as exc:
            stats.error = str(exc)
            result = failed_result(role, request, stats, "transient")
        result.stats.cli_attempts = stats.cli_attempts
        return result

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        start = head_commit(Path(request.worktree))
        result = self._session("diagnosis_patch", request)
        assert isinstance(result, DiagnosisResult)
        undo_agent_commits(Path(request.worktree), start)
        return finish_diagnosis(result, Path(request.worktree))

    def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        result = self._session("reflection", request)
        assert isinstance(result, ReflectionResult)
        return result

    def evolve(self, request: EvolutionRequest) -> EvolutionResult:
        result = self._session("evolution", request)
        assert isinstance(result, EvolutionResult)
        return result

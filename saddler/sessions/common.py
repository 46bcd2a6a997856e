"""Helpers shared by the LLM backends (`claude`, `command`).

Structured-output parsing and validation into the schema's results, minimal failed results the loop
can fall back on, transcript files, retry with backoff, and the protected-path / Bash policy that the
claude backend's PreToolUse hook enforces (the post-hoc diff check stays the second line of defence).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import ValidationError

from saddler.benchmark import Benchmark
from saddler.config import SessionConfig
from saddler.errors import ConfigError
from saddler.harness.gitcmd import git
from saddler.sessions import guard
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
Request = DiagnosisRequest | ReflectionRequest | EvolutionRequest
Result = DiagnosisResult | ReflectionResult | EvolutionResult
_RESULT_MODELS: dict[str, type[Result]] = {
    "diagnosis_patch": DiagnosisResult,
    "reflection": ReflectionResult,
    "evolution": EvolutionResult,
}
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n```", re.DOTALL)


class OutputError(ValueError):
    """The session's answer is missing, not JSON, or does not match the role's schema."""


def extract_json(payload: Any) -> dict[str, Any]:
    """The JSON object in `payload`: a dict as is, else the last fenced or bare `{...}` object in the text."""
    if isinstance(payload, dict):
        return payload
    if not isinstance(payload, str) or not payload.strip():
        raise OutputError("no answer: the session produced no structured output")
    text = payload.strip()
    candidates = [text, *reversed(_FENCE.findall(text))]
    start = text.rfind("\n{")
    candidates.append(text[start + 1 :] if start >= 0 else text[text.find("{") :])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    raise OutputError(f"answer is not a JSON object: {text[:200]!r}")


def parse_result(role: Role, payload: Any, stats: SessionStats) -> Result:
    """Validate the session's JSON answer (without stats) into the role's result, attaching `stats`.

    Raises `OutputError` naming every schema violation.
    """
    data = dict(extract_json(payload))
    data.pop("stats", None)
    if role == "diagnosis_patch" and isinstance(data.get("hypothesis"), dict):
        hypothesis = dict(data["hypothesis"])
        if str(hypothesis.get("origin", "")).strip() in ("", "patch", "llm"):
            hypothesis["origin"] = llm_origin(str(hypothesis.get("plan", "")))
        data["hypothesis"] = hypothesis
    try:
        return _RESULT_MODELS[role].model_validate({**data, "stats": stats.model_dump()})
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise OutputError(f"answer does not match the {role} schema: {errors}") from exc


def llm_origin(plan: str) -> str:
    """The origin of an LLM patch: `llm:<slug of its plan>`, so the loop can tell mutations apart
    (a repeated plan is the same mutation; `llm:` alone would make every LLM patch look identical)."""
    slug = re.sub(r"[^a-z0-9]+", "-", plan.lower()).strip("-")[:60].rstrip("-")
    return f"llm:{slug or 'patch'}"


def failed_result(role: Role, request: Request, stats: SessionStats, reason: str) -> Result:
    """A valid minimal result for a failed session; the loop falls back on it.

    Diagnosis: status failed. Reflection: no lessons. Evolution: continue from the current node.
    """
    stats = stats.model_copy(update={"outcome": f"failed:{reason}"})
    if role == "diagnosis_patch":
        return DiagnosisResult(status="failed", reason=reason, stats=stats)
    if role == "reflection":
        return ReflectionResult(lessons=[], summary=f"reflection failed: {reason}", stats=stats)
    assert isinstance(request, EvolutionRequest)
    return EvolutionResult(
        action="continue", parent_node_id=request.current_node_id, rationale=f"evolution failed: {reason}", stats=stats
    )


def finish_diagnosis(result: DiagnosisResult, worktree: Path) -> DiagnosisResult:
    """Reconcile the agent's claim with the worktree: `patched` with no change becomes `no_patch`,
    changed files fill `hypothesis.files` when the agent left it empty, outcome follows status."""
    changed = changed_files(worktree)
    if result.status == "patched" and not changed:
        result = result.model_copy(
            update={"status": "no_patch", "reason": "the agent reported a patch but the worktree is unchanged"}
        )
    if result.status == "patched" and result.hypothesis is not None and not result.hypothesis.files:
        result = result.model_copy(update={"hypothesis": result.hypothesis.model_copy(update={"files": changed})})
    if result.status == "no_patch" and result.stats.outcome == "ok":
        result = result.model_copy(update={"stats": result.stats.model_copy(update={"outcome": "no_patch"})})
    return result


def head_commit(worktree: Path) -> str | None:
    """The worktree's HEAD commit, or None when it is not a git checkout."""
    proc = git(["rev-parse", "HEAD"], worktree, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def undo_agent_commits(worktree: Path, start: str | None) -> bool:
    """If the agent committed (HEAD moved from `start`), move HEAD back keeping its changes in the working
    tree, so saddler's own commit and diff see them; returns whether anything was undone."""
    if start is None or head_commit(worktree) in (None, start):
        return False
    git(["reset", "-q", "--soft", start], worktree)
    return True


def changed_files(worktree: Path) -> list[str]:
    """Paths (relative to `worktree`) that differ from HEAD, untracked files included, sorted."""
    proc = git(["status", "--porcelain", "--untracked-files=all", "-z"], worktree, check=False)
    if proc.returncode != 0:
        return []
    paths = []
    entries = proc.stdout.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":
                i += 1  # rename/copy: the next entry is the source path
        i += 1
    return sorted(set(paths))


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

"""Optimizer sessions paid for once: every call is keyed (iteration, role, attempt) in the store.

A key already stored is replayed, not paid again: its validated answer is rebuilt from the row, and a diagnosis
session's worktree change (a binary-safe diff kept in `blobs`) is applied to the fresh worktree of the same
parent. So a run killed or interrupted anywhere resumes with the same sessions, the same costs and the same
edits as an uninterrupted one. Failed sessions are retried (see `failure_reason`); each retry is one more attempt.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from evodag.models import SessionRow
from evodag.store import EvoDAG
from saddler.harness.diffs import worktree_head
from saddler.harness.gitcmd import worktree_admin_dir
from saddler.harness.space import HarnessSpace
from saddler.ports import SessionBackend
from saddler.run.confinement import Allowance, FolderState, concurrent_writes, escapes
from saddler.run.faults import fault_point
from saddler.run.usage_window import UsageWindow
from saddler.schedule.hub import Hub
from saddler.schedule.latency import LatencyModel
from saddler.sessions.answers import failed_result
from saddler.sessions.llm_backend import UsageLimitError, transcript_path
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

R = TypeVar("R", DiagnosisResult, ReflectionResult, EvolutionResult)

_FAILURES = {
    "unparsable_output": "its answer could not be read",
    "max_turns": "it ran out of turns before writing its answer; work in fewer steps and answer earlier",
    "budget": "it reached its budget before writing its answer; work in fewer steps",
    "timeout": "it timed out before writing its answer; work in fewer steps",
    "transient": "the model API kept failing (rate limit or overload)",
    "error": "it ended in an error",
    "escaped": "it changed files outside its worktree (refused: work only in the worktree)",
}


def failure_reason(stats: SessionStats) -> str:
    """Why a session failed, in words for its retry prompt; '' when it answered (outcome not `failed:*`)."""
    if not stats.outcome.startswith("failed:"):
        return ""
    code = stats.outcome.split(":", 1)[1]
    if code.startswith("exit_"):
        text = f"the agent exited with status {code[5:]} without an answer"
    else:
        text = _FAILURES.get(code, f"it failed ({code})")
    return f"the session failed: {text}" + (f" — {stats.error.strip()[:600]}" if stats.error.strip() else "")


def worth_asking_again(stats: SessionStats) -> bool:
    """Whether a failed session is worth a new attempt: not when the model API kept failing (`transient`): the
    backend already retried it with backoff, and asking again would multiply the retries (and the CLI's own)."""
    return stats.outcome != "failed:transient"


class SessionCalls:
    """The loop's door to the backend: one method per role, each paid for at most once per key.

    Around every session of an agent backend (`backend.confined_by_saddler` false: anything but offline) the run
    folder is checked (`saddler.run.confinement`): a session that changed anything outside its worktree is
    discarded (a failed result, `failed:escaped`, its writes to the clone's git files put back, a
    `session.escaped` event). A session that hit its plan's usage limit waits for the window
    (`saddler.run.usage_window`) and is asked again; it is recorded only once it ran.

    `view` writes the session view of the EvoDAG (`evodag.view`); it is called before every paid session of a
    backend that reads the history (`SessionBackend.reads_history`), so the session queries the run as it is then,
    without anything held out. It is written before the run folder's state is taken: saddler writes it, the
    session may not."""

    def __init__(
        self,
        store: EvoDAG,
        run_id: int,
        backend: SessionBackend,
        space: HarnessSpace,
        *,
        run_dir: Path | None = None,
        window: UsageWindow | None = None,
        say: Callable[[str], None] = lambda _text: None,
        view: Callable[[], object] | None = None,
    ) -> None:
        self.store, self.run_id, self.backend, self.space = store, run_id, backend, space
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.window = window
        self.say = say
        self.view = view
        self.hub: Hub | None = None  # the run's scheduler, once it runs (sessions then wait as tasks)
        # whether saddler's own work (other iterations, rollouts still landing) may write the run folder while a
        # session runs: asked when the session starts (`saddler.run.pipeline.attach` sets it)
        self.beside_others: Callable[[], bool] = lambda: False
        self.latency: LatencyModel | None = None  # a virtual hub's session latencies

    def diagnose(self, request: DiagnosisRequest, node_id: int) -> tuple[DiagnosisResult, str | None]:
        """Diagnosis-patch in `request.worktree` (a fresh worktree of the parent); a stored attempt's change is
        applied there instead of asking the backend again. Returns the answer and, when the worktree was staged
        here, its tree (for `HarnessSpace.commit_worktree(..., tree=)`; None: stage it when committing)."""
        worktree = Path(request.worktree)
        stored = self._stored(request.iteration, "diagnosis_patch", request.attempt)
        if stored is not None:
            if stored.change_sha is not None:
                self.space.apply_change(worktree, self.store.get_blob_bytes(stored.change_sha))
            return _rebuild(DiagnosisResult, stored), None
        result = self._ask("diagnosis_patch", request, lambda: self.backend.diagnose_patch(request), worktree)
        assert isinstance(result, DiagnosisResult)
        escaped = result.stats.outcome == "failed:escaped"
        change = self.space.worktree_change(worktree) if result.status == "patched" and not escaped else None
        patch = change.patch if change is not None else None
        self._record("diagnosis_patch", request.iteration, request.attempt, node_id, result, patch)
        fault_point("session")
        return result, change.tree if change is not None else None

    def reflect(self, request: ReflectionRequest, node_id: int) -> ReflectionResult:
        stored = self._stored(request.iteration, "reflection", request.attempt)
        if stored is not None:
            return _rebuild(ReflectionResult, stored)
        result = self._ask("reflection", request, lambda: self.backend.reflect(request), None)
        assert isinstance(result, ReflectionResult)
        self._record("reflection", request.iteration, request.attempt, node_id, result, None)
        return result

    def evolve(self, request: EvolutionRequest, node_id: int) -> EvolutionResult:
        stored = self._stored(request.iteration, "evolution", request.attempt)
        if stored is not None:
            return _rebuild(EvolutionResult, stored)
        result = self._ask("evolution", request, lambda: self.backend.evolve(request), None)
        assert isinstance(result, EvolutionResult)
        self._record("evolution", request.iteration, request.attempt, node_id, result, None)
        fault_point("evolve")
        return result

    def _ask(
        self,
        role: Role,
        request: DiagnosisRequest | ReflectionRequest | EvolutionRequest,
        call: Callable[[], DiagnosisResult | ReflectionResult | EvolutionResult],
        worktree: Path | None,
    ) -> DiagnosisResult | ReflectionResult | EvolutionResult:
        """One session through the usage window and the confinement check."""
        head = diagnosis_head(worktree) if worktree is not None else None
        while True:
            if self.window is not None:
                self.window.wait()
            if self.view is not None and getattr(self.backend, "reads_history", True):
                self.view()
            allowance = self._allowance(role, request, worktree)
            before = FolderState.take(self.run_dir, allowance) if allowance is not None and self.run_dir else None
            try:
                result = self._timed(role, request, call)
            except UsageLimitError as exc:
                if self.window is None:
                    raise
                self.window.closed(exc, role, request.iteration)
                if worktree is not None and head is not None:
                    self.space.reset_worktree(worktree, head)  # what the stopped session half-did is dropped
                continue
            if before is None or allowance is None or self.run_dir is None:
                return result
            wrong = escapes(before, FolderState.take(self.run_dir, allowance), allowance)
            if not wrong:
                return result
            return self._discard(role, request, result, wrong, before, worktree)

    def _timed(
        self,
        role: Role,
        request: DiagnosisRequest | ReflectionRequest | EvolutionRequest,
        call: Callable[[], DiagnosisResult | ReflectionResult | EvolutionResult],
    ) -> DiagnosisResult | ReflectionResult | EvolutionResult:
        """The session's answer, as the run's scheduler times it: on a virtual clock it is computed now and the
        task waits the session's latency (`LatencyModel.session`, keyed iteration:role:attempt); in real time an
        agent's session runs on a thread of its own while the other tasks go on (saddler's own rules, the offline
        backend, answer at once, here). Outside the scheduler: now."""
        hub = self.hub
        if hub is None or Hub.current() is None:
            return call()
        if hub.virtual:
            result = call()
            assert self.latency is not None
            hub.sleep(self.latency.session(role, f"{request.iteration}:{role}:{request.attempt}"))
            return result
        if getattr(self.backend, "confined_by_saddler", False):
            return call()
        return hub.run_in_thread(call, role).result()

    def _allowance(
        self, role: Role, request: DiagnosisRequest | ReflectionRequest | EvolutionRequest, worktree: Path | None
    ) -> Allowance | None:
        if self.run_dir is None or getattr(self.backend, "confined_by_saddler", False):
            return None
        root = self.run_dir.resolve()
        git_dir = self.space.git_dir.resolve()
        admin = worktree_admin_dir(worktree) if worktree is not None else None
        prefix = transcript_path(root, request.iteration, role, request.attempt).with_suffix("").name
        git = _inside(git_dir, root) or "harness/.git"
        return Allowance(
            worktree=_inside(worktree, root),
            admin=_inside(admin, root),
            session_prefix=f"sessions/{prefix}.",
            git_dir=git,
            shared=concurrent_writes(git) if self.beside_others() else (),
        )

    def _discard(
        self,
        role: Role,
        request: DiagnosisRequest | ReflectionRequest | EvolutionRequest,
        result: DiagnosisResult | ReflectionResult | EvolutionResult,
        wrong: list[tuple[str, str]],
        before: FolderState,
        worktree: Path | None,
    ) -> DiagnosisResult | ReflectionResult | EvolutionResult:
        put_back = before.restore(wrong)
        paths = [f"{rel} ({change})" for rel, change in wrong]
        self.store.log_event(
            "session.escaped",
            {
                "role": role,
                "iteration": request.iteration,
                "attempt": request.attempt,
                "paths": paths[:50],
                "restored": put_back[:50],
            },
            run_id=self.run_id,
        )
        self.say(
            f"warning: the {role} session of iteration {request.iteration} changed files outside its worktree "
            f"({', '.join(paths[:5])}{' …' if len(paths) > 5 else ''}); it is discarded"
        )
        if worktree is not None:
            self.space.discard_worktree(worktree)  # never reused, never staged by saddler's git
        stats = result.stats.model_copy(update={"error": f"changed outside its worktree: {', '.join(paths[:20])}"})
        return failed_result(role, request, stats, "escaped")

    def _stored(self, iteration: int, role: str, attempt: int) -> SessionRow | None:
        row = self.store.session_at(self.run_id, iteration, role, attempt)
        return row if row is not None and row.result is not None else None

    def _record(
        self,
        role: str,
        iteration: int,
        attempt: int,
        node_id: int | None,
        result: DiagnosisResult | ReflectionResult | EvolutionResult,
        change: bytes | None,
    ) -> None:
        stats = result.stats
        self.store.add_session(
            self.run_id,
            role,
            stats.backend,
            change=change,
            iteration=iteration,
            attempt=attempt,
            node_id=node_id,
            result=result.model_dump(mode="json", exclude={"stats"}),
            **stats.model_dump(exclude={"backend"}),
        )


def _rebuild(model: type[R], row: SessionRow) -> R:
    stats = SessionStats(
        backend=row.backend,
        model=row.model,
        turns=row.turns,
        tokens_in=row.tokens_in,
        tokens_out=row.tokens_out,
        cost_usd=row.cost_usd,
        duration_s=row.duration_s,
        transcript_path=row.transcript_path,
        outcome=row.outcome,
        error=row.error,
        cli_attempts=row.cli_attempts or 1,
    )
    return model.model_validate({**(row.result or {}), "stats": stats.model_dump()})


def diagnosis_head(worktree: Path) -> str | None:
    """The commit a diagnosis worktree starts from (read before the agent runs, without a git process)."""
    return worktree_head(worktree)


def _inside(path: Path | None, root: Path) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None

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
from saddler.harness.space import HarnessSpace
from saddler.ports import SessionBackend
from saddler.run.faults import fault_point
from saddler.sessions.schema import (
    DiagnosisRequest,
    DiagnosisResult,
    EvolutionRequest,
    EvolutionResult,
    ReflectionRequest,
    ReflectionResult,
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


class SessionCalls:
    """The loop's door to the backend: one method per role, each paid for at most once per key.

    `view` writes the session view of the EvoDAG (`evodag.view`); it is called before every paid session of a
    backend that reads the history (`SessionBackend.reads_history`), so the session queries the run as it is then,
    without anything held out."""

    def __init__(
        self,
        store: EvoDAG,
        run_id: int,
        backend: SessionBackend,
        space: HarnessSpace,
        view: Callable[[], object] | None = None,
    ) -> None:
        self.store, self.run_id, self.backend, self.space = store, run_id, backend, space
        self.view = view

    def _before_session(self) -> None:
        if self.view is not None and getattr(self.backend, "reads_history", True):
            self.view()

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
        self._before_session()
        result = self.backend.diagnose_patch(request)
        change = self.space.worktree_change(worktree) if result.status == "patched" else None
        patch = change.patch if change is not None else None
        self._record("diagnosis_patch", request.iteration, request.attempt, node_id, result, patch)
        fault_point("session")
        return result, change.tree if change is not None else None

    def reflect(self, request: ReflectionRequest, node_id: int) -> ReflectionResult:
        stored = self._stored(request.iteration, "reflection", request.attempt)
        if stored is not None:
            return _rebuild(ReflectionResult, stored)
        self._before_session()
        result = self.backend.reflect(request)
        self._record("reflection", request.iteration, request.attempt, node_id, result, None)
        return result

    def evolve(self, request: EvolutionRequest, node_id: int) -> EvolutionResult:
        stored = self._stored(request.iteration, "evolution", request.attempt)
        if stored is not None:
            return _rebuild(EvolutionResult, stored)
        self._before_session()
        result = self.backend.evolve(request)
        self._record("evolution", request.iteration, request.attempt, node_id, result, None)
        fault_point("evolve")
        return result

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
    )
    return model.model_validate({**(row.result or {}), "stats": stats.model_dump()})

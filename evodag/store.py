"""The EvoDAG store: the one API over the SQLite file (no SQL outside `evodag`).

SQLite through sqlite-utils, WAL, busy timeout; schema in `evodag.schema` (appended migrations).
Writers: one process (the loop). Readers (`evo-dag`, `saddler status`) open with `readonly=True`
and never block or break the writer. Every add/update commits before returning, so a crash loses
nothing already returned. `transaction()` groups several writes atomically.

Unknown ids raise `evodag.errors.UnknownNodeError` / `UnknownEdgeError` / `UnknownTaskError`;
a missing DB file opened read-only raises `evodag.errors.MissingDatabaseError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evodag.models import Edge, Event, Iteration, Lesson, Node, RolloutRow, Run, SessionRow

Clock = Callable[[], str]  # returns an ISO-8601 timestamp


class EvoDAG:
    """Open (and migrate) the store at `path`. Use as a context manager or call `close()`."""

    def __init__(self, path: str | Path, *, readonly: bool = False, clock: Clock | None = None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> EvoDAG:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        raise NotImplementedError
        yield

    # runs ---------------------------------------------------------------------------------------
    def create_run(self, config: dict[str, Any], seed: int) -> Run:
        raise NotImplementedError

    def get_run(self, run_id: int | None = None) -> Run:
        """The run with `run_id`, or the latest run when None (raises if there is none)."""
        raise NotImplementedError

    def update_run(self, run_id: int, **fields: Any) -> Run:
        raise NotImplementedError

    # nodes --------------------------------------------------------------------------------------
    def add_node(
        self,
        run_id: int,
        commit: str,
        parent_id: int | None,
        iteration: int,
        phase: str,
        patch_kind: str,
        origin: str,
        status: str = "pending",
        status_reason: str = "",
        hypothesis: dict[str, Any] | None = None,
        lines_changed: int = 0,
    ) -> Node:
        raise NotImplementedError

    def update_node(self, node_id: int, **fields: Any) -> Node:
        raise NotImplementedError

    def get_node(self, node_id: int) -> Node:
        raise NotImplementedError

    def nodes(self, run_id: int | None = None, status: str | None = None) -> list[Node]:
        """Nodes ordered by id."""
        raise NotImplementedError

    def node_by_commit(self, commit: str, run_id: int | None = None) -> Node | None:
        raise NotImplementedError

    # edges and blobs ----------------------------------------------------------------------------
    def add_edge(
        self,
        run_id: int,
        parent_id: int,
        child_id: int,
        kind: str,
        diff: str,
        files_changed: list[str],
        lines_added: int,
        lines_removed: int,
        source_edge_id: int | None = None,
    ) -> Edge:
        """Store the diff content-addressed (sha256) in `blobs` and the edge pointing at it."""
        raise NotImplementedError

    def set_edge_transitions(
        self, edge_id: int, fixed: list[str], regressed: list[str], still_failing: list[str], still_passing: list[str]
    ) -> Edge:
        raise NotImplementedError

    def get_edge(self, edge_id: int) -> Edge:
        raise NotImplementedError

    def edge_between(self, parent_id: int, child_id: int) -> Edge:
        raise NotImplementedError

    def edges(self, run_id: int | None = None) -> list[Edge]:
        raise NotImplementedError

    def edge_into(self, child_id: int) -> Edge | None:
        """The edge whose child is `child_id` (every non-root node has exactly one)."""
        raise NotImplementedError

    def get_blob(self, sha: str) -> str:
        raise NotImplementedError

    # rollouts -----------------------------------------------------------------------------------
    def add_rollout(self, **fields: Any) -> RolloutRow:
        """Insert one rollout (fields = RolloutRow minus id/created_at). Idempotent on
        (run_id, node_id, cache_key): a second insert returns the existing row."""
        raise NotImplementedError

    def rollouts(
        self,
        run_id: int | None = None,
        node_id: int | None = None,
        split: str | None = None,
        task_id: str | None = None,
    ) -> list[RolloutRow]:
        raise NotImplementedError

    def find_rollout(self, cache_key: str) -> RolloutRow | None:
        """Any stored rollout with this cache key (any node, any run in this DB)."""
        raise NotImplementedError

    def count_rollouts(self, run_id: int | None = None) -> int:
        raise NotImplementedError

    def rollout_cost(self, run_id: int | None = None) -> float:
        raise NotImplementedError

    # lessons and sessions -----------------------------------------------------------------------
    def add_lesson(
        self,
        run_id: int,
        category: str,
        attribution: str,
        text: str,
        node_id: int | None = None,
        edge_id: int | None = None,
        iteration: int | None = None,
        task_id: str | None = None,
    ) -> Lesson:
        raise NotImplementedError

    def lessons(
        self,
        run_id: int | None = None,
        node_id: int | None = None,
        edge_id: int | None = None,
        category: str | None = None,
        attribution: str | None = None,
        task_id: str | None = None,
    ) -> list[Lesson]:
        raise NotImplementedError

    def add_session(self, run_id: int, role: str, backend: str, **fields: Any) -> SessionRow:
        raise NotImplementedError

    def sessions(self, run_id: int | None = None, iteration: int | None = None) -> list[SessionRow]:
        raise NotImplementedError

    def session_cost(self, run_id: int | None = None) -> float:
        raise NotImplementedError

    # iterations ---------------------------------------------------------------------------------
    def start_iteration(self, run_id: int, number: int, epoch: int, batch: list[str], **fields: Any) -> Iteration:
        raise NotImplementedError

    def update_iteration(self, iteration_id: int, **fields: Any) -> Iteration:
        raise NotImplementedError

    def iterations(self, run_id: int | None = None) -> list[Iteration]:
        raise NotImplementedError

    def current_iteration(self, run_id: int | None = None) -> Iteration | None:
        """The latest iteration (finished or not), or None."""
        raise NotImplementedError

    # events -------------------------------------------------------------------------------------
    def log_event(self, kind: str, payload: dict[str, Any] | None = None, run_id: int | None = None) -> Event:
        raise NotImplementedError

    def events(self, since_id: int = 0, run_id: int | None = None) -> list[Event]:
        raise NotImplementedError

    # shared rollout cache (a table any DB has; a run may point at another DB as its cache) ------
    def cache_get(self, cache_key: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def cache_put(self, cache_key: str, payload: dict[str, Any]) -> None:
        raise NotImplementedError

    # queries for people and sessions (also used by the evo-dag CLI) ------------------------------
    def summary(self, run_id: int | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def scenario(self, task_id: str, run_id: int | None = None) -> dict[str, Any]:
        raise NotImplementedError

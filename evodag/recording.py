"""Recording the run beside its graph: the `EvoDAG` methods that write and read lessons, sessions, iterations and
the shared rollout cache (the records themselves are the dataclasses of `evodag.models`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evodag import codec
from evodag.base import StoreBase
from evodag.connection import chunks, insert, update
from evodag.decisions import DECISIONS
from evodag.errors import EvoDAGError
from evodag.models import ATTRIBUTIONS, LESSON_CATEGORIES, Iteration, Lesson, SessionRow

SESSION_ROLES = ("diagnosis_patch", "reflection", "evolution")
ITERATION_STEPS = (
    "started", "evolved", "parent_evaluated", "patched", "validated", "candidate_evaluated", "dev", "reflected", "done",
)  # fmt: skip


class RecordingMixin(StoreBase):
    """Lessons, sessions, iterations and cache entries. Every add/update commits before returning."""

    # lessons ------------------------------------------------------------------------------------
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
        """Store one reflection conclusion; logs `lesson.added`."""
        codec.check_choice("lesson category", category, LESSON_CATEGORIES)
        codec.check_choice("attribution", attribution, ATTRIBUTIONS)
        values = {
            "run_id": run_id, "node_id": node_id, "edge_id": edge_id, "iteration": iteration, "task_id": task_id,
            "category": category, "attribution": attribution, "text": text, "created_at": self.clock(),
        }  # fmt: skip
        with self.transaction():
            self._run_or_latest(run_id)
            if node_id is not None:
                self._require_node(node_id)
            lesson_id = insert(self.conn, "lessons", values)
            self._event("lesson.added", {"id": lesson_id, **values}, run_id)
        lesson = self._one(Lesson, "id = ?", (lesson_id,))
        assert lesson is not None
        return lesson

    def lessons(
        self,
        run_id: int | None = None,
        node_id: int | None = None,
        edge_id: int | None = None,
        category: str | None = None,
        attribution: str | None = None,
        task_id: str | None = None,
    ) -> list[Lesson]:
        """Lessons matching every given filter, ordered by id."""
        filters = {
            "run_id": run_id, "node_id": node_id, "edge_id": edge_id, "category": category,
            "attribution": attribution, "task_id": task_id,
        }  # fmt: skip
        return self._many(Lesson, filters)

    # sessions -----------------------------------------------------------------------------------
    def add_session(
        self, run_id: int, role: str, backend: str, *, change: bytes | None = None, **fields: Any
    ) -> SessionRow:
        """Record one optimizer agent conversation (fields = SessionRow's optional ones); logs `session.added`.

        With `attempt` (and `iteration`) set the row is keyed by (run, iteration, role, attempt): a session is paid
        for once, so adding a key that is already stored changes nothing and returns the stored row. `change` (a
        diagnosis session's worktree change, bytes) is stored content-addressed in `blobs` as `change_sha`.
        """
        codec.check_fields(
            SessionRow, fields, forbidden=("id", "run_id", "role", "backend", "created_at", "change_sha")
        )
        codec.check_choice("session role", role, SESSION_ROLES)
        values = {"run_id": run_id, "role": role, "backend": backend, **fields, "created_at": self.clock()}
        if fields.get("attempt") is not None and fields.get("iteration") is None:
            raise EvoDAGError("a keyed session (attempt set) needs its iteration")
        with self.transaction():
            self._run_or_latest(run_id)
            if fields.get("attempt") is not None:
                stored = self.session_at(run_id, fields["iteration"], role, fields["attempt"])
                if stored is not None:
                    return stored
            if change is not None:
                values["change_sha"] = self.put_blob(change)
            session_id = insert(self.conn, "sessions", codec.encode("sessions", values))
            self._event("session.added", {"id": session_id, **{k: v for k, v in values.items() if k != "result"}},
                        run_id)  # fmt: skip
        session = self._one(SessionRow, "id = ?", (session_id,))
        assert session is not None
        return session

    def session_at(self, run_id: int, iteration: int, role: str, attempt: int) -> SessionRow | None:
        """The stored session with this key, or None (it has not been paid for yet)."""
        return self._one(
            SessionRow,
            "run_id = ? AND iteration = ? AND role = ? AND attempt = ?",
            (run_id, iteration, role, attempt),
        )

    def sessions(self, run_id: int | None = None, iteration: int | None = None) -> list[SessionRow]:
        """Sessions ordered by id."""
        return self._many(SessionRow, {"run_id": run_id, "iteration": iteration})

    # iterations ---------------------------------------------------------------------------------
    def _check_iteration(self, fields: dict[str, Any]) -> None:
        if "step" in fields:
            codec.check_choice("iteration step", fields["step"], ITERATION_STEPS)
        if fields.get("decision") is not None:
            codec.check_choice("decision", fields["decision"], DECISIONS)
        for key in ("parent_id", "candidate_id"):
            if fields.get(key) is not None:
                self._require_node(fields[key])

    def start_iteration(self, run_id: int, number: int, epoch: int, batch: list[str], **fields: Any) -> Iteration:
        """Open iteration `number` over `batch`; logs `iteration.started`."""
        codec.check_fields(Iteration, fields, forbidden=("id", "run_id", "number", "epoch", "batch"))
        values = {"run_id": run_id, "number": number, "epoch": epoch, "batch": list(batch), **fields}
        values.setdefault("started_at", self.clock())
        with self.transaction():
            self._run_or_latest(run_id)
            self._check_iteration(values)
            iteration_id = insert(self.conn, "iterations", codec.encode("iterations", values))
            assert iteration_id is not None
            self._event("iteration.started", {"id": iteration_id, **values}, run_id)
        return self.get_iteration(iteration_id)

    def update_iteration(self, iteration_id: int, **fields: Any) -> Iteration:
        """Advance an iteration (step, parent, candidate, decision, ...); logs `iteration.updated`."""
        codec.check_fields(Iteration, fields, forbidden=("id", "run_id"))
        with self.transaction():
            current = self.get_iteration(iteration_id)
            self._check_iteration(fields)
            update(self.conn, "iterations", iteration_id, codec.encode("iterations", fields))
            self._event("iteration.updated", {"id": iteration_id, **fields}, current.run_id)
        return self.get_iteration(iteration_id)

    def get_iteration(self, iteration_id: int) -> Iteration:
        found = self._one(Iteration, "id = ?", (iteration_id,))
        if found is None:
            raise EvoDAGError(f"unknown iteration id {iteration_id}; `evo-dag summary` shows the current iteration")
        return found

    def iterations(self, run_id: int | None = None) -> list[Iteration]:
        """Iterations ordered by id."""
        return self._many(Iteration, {"run_id": run_id})

    def current_iteration(self, run_id: int | None = None) -> Iteration | None:
        """The latest iteration (finished or not), or None."""
        if run_id is None:
            return self._one(Iteration, "1 ORDER BY id DESC", ())
        return self._one(Iteration, "run_id = ? ORDER BY id DESC", (run_id,))

    # shared rollout cache -----------------------------------------------------------------------
    def cache_get(self, cache_key: str) -> dict[str, Any] | None:
        """The payload stored under `cache_key`, or None."""
        row = self.conn.execute("SELECT payload FROM rollout_cache WHERE cache_key = ?", (cache_key,)).fetchone()
        return None if row is None else codec.cache_payload(cache_key, row[0])

    def cache_get_many(self, cache_keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """`cache_get` of many keys at once: key -> payload; keys with no payload are absent."""
        found: dict[str, dict[str, Any]] = {}
        for chunk in chunks(sorted(set(cache_keys))):
            marks = ", ".join("?" for _ in chunk)
            sql = f"SELECT cache_key, payload FROM rollout_cache WHERE cache_key IN ({marks})"
            for key, payload in self.conn.execute(sql, chunk):
                found[key] = codec.cache_payload(key, payload)
        return found

    def cache_put(self, cache_key: str, payload: dict[str, Any]) -> None:
        """Store (or replace) the payload under `cache_key`."""
        with self.transaction():
            self.conn.execute(
                "INSERT OR REPLACE INTO rollout_cache (cache_key, payload, created_at) VALUES (?, ?, ?)",
                (cache_key, codec.dumps(payload), self.clock()),
            )

"""The EvoDAG store: the one API over the SQLite file (no SQL outside `evodag`).

Plain `sqlite3` (docs/architecture.md says why not sqlite-utils here), WAL, busy timeout; schema in
`evodag.schema` (appended migrations).
Writers: one process (the loop). Readers (`evo-dag`, `saddler status`) open with `readonly=True`
and never block or break the writer. Every add/update commits before returning, so a crash loses
nothing already returned. `transaction()` groups several writes atomically.

Unknown ids raise `evodag.errors.UnknownNodeError` / `UnknownEdgeError` / `UnknownTaskError`;
a missing DB file opened read-only raises `evodag.errors.MissingDatabaseError`.
Every add/update of a run, node, edge or iteration (and every added lesson or session) appends an
`events` row whose payload holds the changed fields: the append-only log of every state transition.
"""

from __future__ import annotations

import hashlib
from typing import Any

from evodag import codec, queries
from evodag.base import Clock, utc_now
from evodag.connection import insert, update
from evodag.errors import UnknownEdgeError, UnknownNodeError
from evodag.models import EDGE_KINDS, NODE_STATUSES, Edge, Event, Node, Run
from evodag.recording import RecordingMixin
from evodag.rollouts import RolloutsMixin

RUN_STATUSES = ("running", "paused", "finished", "failed")


def diff_sha(diff: str) -> str:
    """The content address of a diff in the `blobs` table (sha256 of its UTF-8 bytes)."""
    return hashlib.sha256(diff.encode("utf-8")).hexdigest()


class EvoDAG(RolloutsMixin, RecordingMixin):
    """Open (and migrate) the store at `path`. Use as a context manager or call `close()`."""

    def __enter__(self) -> EvoDAG:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # runs ---------------------------------------------------------------------------------------
    def create_run(self, config: dict[str, Any], seed: int) -> Run:
        with self.transaction():
            values = {"config": config, "seed": seed, "started_at": self.clock(), "status": "running"}
            run_id = insert(self.conn, "runs", codec.encode("runs", values))
            assert run_id is not None
            self._event("run.created", values, run_id)
        return self.get_run(run_id)

    def get_run(self, run_id: int | None = None) -> Run:
        """The run with `run_id`, or the latest run when None (raises if there is none)."""
        run = self._one(Run, "id = ?", (self._run_or_latest(run_id),))
        assert run is not None
        return run

    def update_run(self, run_id: int, **fields: Any) -> Run:
        codec.check_fields(Run, fields, forbidden=("id",))
        if "status" in fields:
            codec.check_choice("run status", fields["status"], RUN_STATUSES)
        with self.transaction():
            self._run_or_latest(run_id)
            update(self.conn, "runs", run_id, codec.encode("runs", fields))
            self._event("run.updated", {"id": run_id, **fields}, run_id)
        return self.get_run(run_id)

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
        """Insert a candidate; `parent_id` must name an existing node (None for a root)."""
        codec.check_choice("node status", status, NODE_STATUSES)
        values = {
            "run_id": run_id, "commit": commit, "parent_id": parent_id, "iteration": iteration, "phase": phase,
            "patch_kind": patch_kind, "origin": origin, "status": status, "status_reason": status_reason,
            "hypothesis": hypothesis, "lines_changed": lines_changed, "created_at": self.clock(),
        }  # fmt: skip
        with self.transaction():
            self._run_or_latest(run_id)
            if parent_id is not None:
                self._require_node(parent_id)
            node_id = insert(self.conn, "nodes", codec.encode("nodes", values))
            assert node_id is not None
            self._event("node.added", {"id": node_id, **values}, run_id)
        return self.get_node(node_id)

    def update_node(self, node_id: int, **fields: Any) -> Node:
        """Set fields (scores, status, reason, ...) of a node; logs `node.updated` with them."""
        codec.check_fields(Node, fields, forbidden=("id", "run_id", "created_at"))
        if "status" in fields:
            codec.check_choice("node status", fields["status"], NODE_STATUSES)
        with self.transaction():
            node = self.get_node(node_id)
            if fields.get("parent_id") is not None:
                self._require_node(fields["parent_id"])
            update(self.conn, "nodes", node_id, codec.encode("nodes", fields))
            self._event("node.updated", {"id": node_id, **fields}, node.run_id)
        return self.get_node(node_id)

    def get_node(self, node_id: int) -> Node:
        node = self._one(Node, "id = ?", (node_id,))
        if node is None:
            raise UnknownNodeError(node_id)
        return node

    def nodes(self, run_id: int | None = None, status: str | None = None) -> list[Node]:
        """Nodes ordered by id (all runs when `run_id` is None)."""
        return self._many(Node, {"run_id": run_id, "status": status})

    def node_by_commit(self, commit: str, run_id: int | None = None) -> Node | None:
        """The first node with this commit (in `run_id` when given), or None."""
        if run_id is None:
            return self._one(Node, '"commit" = ? ORDER BY id', (commit,))
        return self._one(Node, '"commit" = ? AND run_id = ? ORDER BY id', (commit, run_id))

    def children(self, node_id: int) -> list[Node]:
        """Nodes whose incoming edge starts at `node_id`, ordered by id."""
        sql = f"SELECT {codec.select_list(Node, 'n')} FROM edges e JOIN nodes n ON n.id = e.child_id "
        decode = codec.decoder(Node)
        return [decode(r) for r in self.conn.execute(sql + "WHERE e.parent_id = ? ORDER BY n.id", (node_id,))]

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
        codec.check_choice("edge kind", kind, EDGE_KINDS)
        sha = diff_sha(diff)
        values = {
            "run_id": run_id, "parent_id": parent_id, "child_id": child_id, "kind": kind, "diff_sha": sha,
            "files_changed": list(files_changed), "lines_added": lines_added, "lines_removed": lines_removed,
            "source_edge_id": source_edge_id, "created_at": self.clock(),
        }  # fmt: skip
        with self.transaction():
            self._run_or_latest(run_id)
            self._require_node(parent_id)
            self._require_node(child_id)
            if source_edge_id is not None:
                self.get_edge(source_edge_id)
            insert(self.conn, "blobs", {"sha": sha, "content": diff}, or_ignore=True)
            edge_id = insert(self.conn, "edges", codec.encode("edges", values))
            assert edge_id is not None
            self._event("edge.added", {"id": edge_id, **values}, run_id)
        return self.get_edge(edge_id)

    def set_edge_transitions(
        self, edge_id: int, fixed: list[str], regressed: list[str], still_failing: list[str], still_passing: list[str]
    ) -> Edge:
        """Record reflection's per-task transitions on an edge (replacing earlier ones)."""
        lists = {"fixed": fixed, "regressed": regressed, "still_failing": still_failing, "still_passing": still_passing}
        lists = {k: list(v) for k, v in lists.items()}
        with self.transaction():
            edge = self.get_edge(edge_id)
            update(self.conn, "edges", edge_id, codec.encode("edges", lists))
            self.conn.execute("DELETE FROM edge_tasks WHERE edge_id = ?", (edge_id,))
            self.conn.executemany(
                "INSERT OR IGNORE INTO edge_tasks (edge_id, task_id, category) VALUES (?, ?, ?)",
                [(edge_id, task, cat) for cat, tasks in lists.items() for task in tasks],
            )
            self._event("edge.updated", {"id": edge_id, **lists}, edge.run_id)
        return self.get_edge(edge_id)

    def get_edge(self, edge_id: int) -> Edge:
        edge = self._one(Edge, "id = ?", (edge_id,))
        if edge is None:
            raise UnknownEdgeError(edge_id)
        return edge

    def edge_between(self, parent_id: int, child_id: int) -> Edge:
        edge = self._one(Edge, "parent_id = ? AND child_id = ? ORDER BY id", (parent_id, child_id))
        if edge is None:
            raise UnknownEdgeError(f"{parent_id}->{child_id}")
        return edge

    def edges(self, run_id: int | None = None) -> list[Edge]:
        """Edges ordered by id (all runs when `run_id` is None)."""
        return self._many(Edge, {"run_id": run_id})

    def edge_into(self, child_id: int) -> Edge | None:
        """The edge whose child is `child_id` (every non-root node has exactly one)."""
        return self._one(Edge, "child_id = ? ORDER BY id", (child_id,))

    def get_blob(self, sha: str) -> str:
        """The text stored under `sha` (bytes stored by `put_blob` are decoded as UTF-8, invalid bytes escaped)."""
        content = self._blob(sha)
        return content.decode("utf-8", "surrogateescape") if isinstance(content, bytes) else str(content)

    def get_blob_bytes(self, sha: str) -> bytes:
        """The exact bytes stored under `sha` (text is encoded as UTF-8)."""
        content = self._blob(sha)
        return content if isinstance(content, bytes) else str(content).encode("utf-8", "surrogateescape")

    # events -------------------------------------------------------------------------------------
    def log_event(self, kind: str, payload: dict[str, Any] | None = None, run_id: int | None = None) -> Event:
        """Append a free-form event (the loop's own milestones: budget checks, pauses, ...)."""
        with self.transaction():
            event_id = self._event(kind, payload or {}, run_id)
        event = self._one(Event, "id = ?", (event_id,))
        assert event is not None
        return event

    def events(self, since_id: int = 0, run_id: int | None = None, kind: str | None = None) -> list[Event]:
        """Events with id > `since_id` (of `run_id` and of `kind` when given), oldest first. Asking for one kind
        reads only that kind's rows (index `events_kind`), not the whole log."""
        decode = codec.decoder(Event)
        filters: list[tuple[str, Any]] = [("run_id = ?", run_id), ("kind = ?", kind), ("id > ?", since_id)]
        used = [(clause, value) for clause, value in filters if value is not None]
        where = " AND ".join(clause for clause, _ in used)
        sql = f"SELECT {codec.select_list(Event)} FROM events WHERE {where} ORDER BY id"
        return [decode(r) for r in self.conn.execute(sql, [value for _, value in used])]

    def last_event(self, run_id: int, kind: str) -> Event | None:
        """The newest event of `kind` in the run, or None (index `events_kind`: one row read)."""
        return self._one(Event, "run_id = ? AND kind = ? ORDER BY id DESC", (run_id, kind))

    def last_node_id(self, run_id: int) -> int:
        """The id of the run's newest node (0 when it has none); ids only grow."""
        row = self.conn.execute("SELECT max(id) FROM nodes WHERE run_id = ?", (run_id,)).fetchone()
        return int(row[0] or 0)

    # queries for people and sessions (also used by the evo-dag CLI; see `evodag.queries`) -------
    def summary(self, run_id: int | None = None) -> dict[str, Any]:
        """Run info, node counts by status, rollout/session count and cost, baseline, best, iteration, decisions."""
        return queries.summary(self, run_id)

    def scenario(self, task_id: str, run_id: int | None = None) -> dict[str, Any]:
        """One task across nodes: outcomes, lessons, fixing/regressing edges (raises UnknownTaskError)."""
        return queries.scenario(self, task_id, run_id)

    def lineage(self, node_id: int) -> list[Node]:
        """Root .. node following parents."""
        return queries.lineage(self, node_id)

    def descendants(self, node_id: int) -> list[Node]:
        """Every node below `node_id`, ordered by id."""
        return queries.descendants(self, node_id)

    def best_node(self, run_id: int | None = None) -> Node | None:
        """The run's best node as the optimizer recorded it (`runs.best_node_id`), or None."""
        return queries.best_node(self, run_id)

    def batch(self, run_id: int | None = None) -> dict[str, Any]:
        """The current iteration's mini-batch with each task's status on parent and candidate."""
        return queries.batch(self, run_id)

    def diff_path(self, a: int, b: int) -> dict[str, Any]:
        """The diffs along a→b, or along both lineages from their common ancestor."""
        return queries.diff_path(self, a, b)


def record_dict(record: Any) -> dict[str, Any]:
    """A record as a plain dict (JSON-ready)."""
    return codec.as_dict(record)


__all__ = ["Clock", "EvoDAG", "diff_sha", "record_dict", "utc_now"]

"""The store's connection, transactions and row helpers shared by the `EvoDAG` record families."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from evodag import codec, integrity
from evodag.connection import Transactions, insert, is_disk_full, open_connection
from evodag.errors import EvoDAGError, StoreFullError, UnknownNodeError, UnknownRunError

Clock = Callable[[], str]  # returns an ISO-8601 timestamp
T = TypeVar("T")


def utc_now() -> str:
    """The default clock: the current UTC time, ISO-8601 with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class StoreBase:
    """Open (and migrate) the store at `path`; the helpers every record family uses."""

    def __init__(self, path: str | Path, *, readonly: bool = False, clock: Clock | None = None) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.clock: Clock = clock or utc_now
        self.conn = open_connection(self.path, readonly=readonly)
        self._tx = Transactions(self.conn)

    def verify_rows(self) -> None:
        """Read every stored value back through its column's type; `CorruptRowError` names the first bad one.
        (A writer does this on open; readers call it when a read fails, to say which value is damaged.)"""
        integrity.check_rows(self.conn, self.path)

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes: all of them commit together or none does (nestable)."""
        self._writable()
        try:
            with self._tx():
                yield
        except sqlite3.OperationalError as exc:
            if is_disk_full(exc):
                raise StoreFullError(str(self.path)) from exc
            raise

    def put_blob(self, content: bytes) -> str:
        """Store `content` content-addressed (sha256 of its bytes) and return the sha; storing twice is harmless."""
        sha = hashlib.sha256(content).hexdigest()
        with self.transaction():
            insert(self.conn, "blobs", {"sha": sha, "content": content}, or_ignore=True)
        return sha

    def _blob(self, sha: str) -> str | bytes:
        row = self.conn.execute("SELECT content FROM blobs WHERE sha = ?", (sha,)).fetchone()
        if row is None:
            raise EvoDAGError(f"unknown blob {sha}; blobs are written by add_edge, is this the right database?")
        content: str | bytes = row[0]
        return content

    # internals ----------------------------------------------------------------------------------
    def _writable(self) -> None:
        if self.readonly:
            raise EvoDAGError(f"{self.path} is open read-only; open EvoDAG(path) without readonly=True to write")

    def _one(self, cls: type[T], where: str, params: tuple[Any, ...]) -> T | None:
        sql = f"SELECT {codec.select_list(cls)} FROM {codec.TABLE_OF[cls]} WHERE {where} LIMIT 1"
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else codec.decoder(cls)(row)

    def _many(self, cls: type[T], filters: dict[str, Any], order: str = "id") -> list[T]:
        conds = [f'"{k}" = ?' for k, v in filters.items() if v is not None]
        params = tuple(v for v in filters.values() if v is not None)
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        sql = f"SELECT {codec.select_list(cls)} FROM {codec.TABLE_OF[cls]}{where} ORDER BY {order}"
        decode = codec.decoder(cls)
        return [decode(r) for r in self.conn.execute(sql, params)]

    def _event(self, kind: str, payload: dict[str, Any], run_id: int | None) -> int:
        values = {"run_id": run_id, "ts": self.clock(), "kind": kind, "payload": codec.dumps(payload)}
        row_id = insert(self.conn, "events", values)
        assert row_id is not None
        return row_id

    def _latest_run_id(self) -> int | None:
        row = self.conn.execute("SELECT max(id) FROM runs").fetchone()
        return None if row[0] is None else int(row[0])

    def _run_or_latest(self, run_id: int | None) -> int:
        rid = self._latest_run_id() if run_id is None else run_id
        if rid is None or self.conn.execute("SELECT 1 FROM runs WHERE id = ?", (rid,)).fetchone() is None:
            raise UnknownRunError(run_id)
        return rid

    def _require_node(self, node_id: int) -> None:
        if self.conn.execute("SELECT 1 FROM nodes WHERE id = ?", (node_id,)).fetchone() is None:
            raise UnknownNodeError(node_id)

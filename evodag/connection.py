"""Opening an EvoDAG file: WAL writer connections, `mode=ro` reader connections, nested transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evodag.errors import EvoDAGError, MissingDatabaseError, SchemaVersionError
from evodag.schema import LATEST, READABLE_FROM, migrate, version

BUSY_TIMEOUT_MS = 10_000


def open_connection(path: Path, *, readonly: bool) -> sqlite3.Connection:
    """A configured autocommit connection. Read-write: WAL, migrated. Read-only: `mode=ro`, never migrates.

    Raises `MissingDatabaseError` for a missing file opened read-only and `SchemaVersionError` when a
    read-only file is not at the current schema version.
    """
    if readonly:
        if not path.is_file():
            raise MissingDatabaseError(str(path))
        uri = path.resolve().as_uri() + "?mode=ro"
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        try:
            found = version(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise EvoDAGError(f"{path} is not an SQLite database ({exc}); point --db at a run's evodag.sqlite") from exc
        if not READABLE_FROM <= found <= LATEST:
            conn.close()
            if found == 0:
                raise EvoDAGError(f"{path} is not an EvoDAG database (no schema); point --db at a run's evodag.sqlite")
            raise SchemaVersionError(
                f"{path} has schema version {found}, this evodag reads {READABLE_FROM}..{LATEST}; "
                "open it once read-write (EvoDAG(path)) to migrate, or upgrade saddler"
            )
        return conn
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    migrate(conn)
    return conn


class Transactions:
    """Nested transactions over one autocommit connection: the outermost is `BEGIN IMMEDIATE`, inner ones are
    savepoints (an exception rolls back just that level and propagates)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.depth = 0

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if self.depth == 0:
            self.conn.execute("BEGIN IMMEDIATE")
            self.depth = 1
            try:
                try:
                    yield
                    self.conn.execute("COMMIT")
                except BaseException:
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                    raise
            finally:
                self.depth = 0
            return
        name = f"evodag_sp{self.depth}"
        self.conn.execute(f"SAVEPOINT {name}")
        self.depth += 1
        try:
            yield
        except BaseException:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")
            raise
        else:
            self.conn.execute(f"RELEASE {name}")
        finally:
            self.depth -= 1


def insert(conn: sqlite3.Connection, table: str, values: dict[str, Any], *, or_ignore: bool = False) -> int | None:
    """INSERT one row; returns its rowid, or None when `or_ignore` and a uniqueness rule skipped it."""
    cols = ", ".join(f'"{c}"' for c in values)
    marks = ", ".join("?" for _ in values)
    verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
    cur = conn.execute(f"{verb} INTO {table} ({cols}) VALUES ({marks})", tuple(values.values()))
    if or_ignore and cur.rowcount == 0:
        return None
    return cur.lastrowid


def update(conn: sqlite3.Connection, table: str, row_id: int, values: dict[str, Any]) -> None:
    """UPDATE one row by id (no-op for empty `values`)."""
    if values:
        sets = ", ".join(f'"{c}" = ?' for c in values)
        conn.execute(f"UPDATE {table} SET {sets} WHERE id = ?", (*values.values(), row_id))

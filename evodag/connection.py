"""Opening an EvoDAG file: WAL writer connections, `mode=ro` reader connections, nested transactions."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evodag import integrity
from evodag.errors import EvoDAGError, MissingDatabaseError, SchemaVersionError, StoreFullError
from evodag.schema import LATEST, READABLE_FROM, migrate, version

BUSY_TIMEOUT_MS = 10_000
MEMORY = ":memory:"  # as for SQLite: a private, migrated store in memory, gone when closed


def open_connection(path: Path, *, readonly: bool) -> sqlite3.Connection:
    """A configured autocommit connection. Read-write: WAL, migrated. Read-only: `mode=ro`, never migrates.
    `path` ":memory:" is a new migrated store in memory (read-write only), as SQLite means it.

    Both refuse a damaged file before anything is written (`evodag.integrity`): `DamagedDatabaseError` for an
    empty file, bytes that are not SQLite, a failed quick check or a missing table; `SchemaVersionError` for a
    version this code does not know; `MissingDatabaseError` for a missing file opened read-only. A new file is
    created whole (built under a temporary name, then linked into place), so a crash never leaves a 0-byte store.
    """
    if str(path) == MEMORY:
        return _in_memory(readonly)
    integrity.check_file(path)
    if readonly:
        if not path.is_file():
            raise MissingDatabaseError(str(path))
        uri = path.resolve().as_uri() + "?mode=ro"
        conn = _connect(uri, uri=True)
        try:
            try:
                found = version(conn)
            except sqlite3.DatabaseError as exc:
                raise EvoDAGError(
                    f"{path} is not an SQLite database ({exc}); point --db at a run's evodag.sqlite"
                ) from exc
            integrity.check_foreign(conn, path, found)
            if not READABLE_FROM <= found <= LATEST:
                if found == 0:
                    raise EvoDAGError(
                        f"{path} is not an EvoDAG database (no schema); point --db at a run's evodag.sqlite"
                    )
                raise SchemaVersionError(
                    f"{path} has schema version {found}, this evodag reads {READABLE_FROM}..{LATEST}; "
                    "open it once read-write (EvoDAG(path)) to migrate, or upgrade saddler"
                )
            integrity.quick_check(conn, path)
            integrity.check_tables(conn, path)
            integrity.check_values(conn, path)
        except BaseException:
            conn.close()
            raise
        return conn
    if not path.exists():
        _create(path)
    conn = _connect(str(path))
    try:
        integrity.quick_check(conn, path)
        found = version(conn)
        integrity.check_foreign(conn, path, found)
        if found > LATEST:
            raise SchemaVersionError(
                f"{path}: database schema version {found} is newer than this evodag ({LATEST}); upgrade saddler"
            )
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        if found < LATEST:  # an older file's columns are those of its own version: migrate (atomically) first
            migrate(conn)
        if found >= 1:  # then check what is there, before anything else writes to it
            integrity.check_tables(conn, path)
            integrity.check_rows(conn, path)
    except sqlite3.OperationalError as exc:
        conn.close()
        if is_disk_full(exc):
            raise StoreFullError(str(path)) from exc
        raise
    except BaseException:
        conn.close()
        raise
    return conn


def _in_memory(readonly: bool) -> sqlite3.Connection:
    if readonly:
        raise MissingDatabaseError(f"{MEMORY} (an in-memory store is new and empty: open it read-write)")
    conn = _connect(MEMORY)
    conn.execute("PRAGMA foreign_keys = ON")
    migrate(conn)
    return conn


def _connect(target: str, *, uri: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(
        target, uri=uri, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _create(path: Path) -> None:
    """Make a new, migrated store at `path` atomically; another process creating it at the same time wins
    harmlessly (its file is used)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{threading.get_ident()}")
    names = [tmp, *(tmp.with_name(tmp.name + suffix) for suffix in ("-journal", "-wal", "-shm"))]
    for leftover in names:
        leftover.unlink(missing_ok=True)
    try:
        conn = _connect(str(tmp))
        try:
            conn.execute("PRAGMA journal_mode = DELETE")  # every commit lands in the file itself, none in a WAL
            migrate(conn)
            integrity.quick_check(conn, tmp)
        finally:
            conn.close()
        try:
            os.link(tmp, path)  # never replaces: another process that created it meanwhile wins
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(tmp, path)
    except sqlite3.OperationalError as exc:
        if is_disk_full(exc):
            raise StoreFullError(str(path)) from exc
        raise
    finally:
        for leftover in names:
            leftover.unlink(missing_ok=True)


def is_disk_full(exc: BaseException) -> bool:
    """True for SQLite's SQLITE_FULL ("database or disk is full") and an OS `ENOSPC`/`EDQUOT`."""
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


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
            if self.conn.in_transaction:  # SQLite rolls the whole transaction back itself on SQLITE_FULL
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


MAX_PARAMS = 500  # bound parameters per `IN (...)` query, well under SQLite's limit (999 before 3.32)


def chunks(values: list[str], size: int = MAX_PARAMS) -> Iterator[list[str]]:
    """`values` in consecutive slices of at most `size` (what one `IN (...)` query may bind)."""
    for start in range(0, len(values), size):
        yield values[start : start + size]

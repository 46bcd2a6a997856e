"""The checks an EvoDAG file passes before it is used, so a damaged file is refused before anything is written.

On every open: not empty, an SQLite file, `PRAGMA quick_check` clean, a schema version this code knows, and every
table of `evodag.models` present with its columns. A writer also reads every row back through the typed decoders
(`check_rows`): a bad JSON text or a text in a number column is named by table, row and column before the loop
writes anything. A reader runs the same type rules as SQL over every table (`check_values`, one scan each, no
row decoded in Python unless it is bad), so any reader (`evo-dag`, `saddler status`, `saddler report`) refuses a
damaged value in one line, naming it, before it reads, prints or writes anything, whatever it would have read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evodag import codec
from evodag.errors import CorruptRowError, DamagedDatabaseError, EvoDAGError

_RESTORE = "restore it from a backup, or move it away to start the run over"


def check_file(path: Path) -> None:
    """Refuse an existing file that cannot hold a database (0 bytes: a truncated copy, not a new store)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        raise DamagedDatabaseError(f"{path} is empty (0 bytes), so it holds no EvoDAG; {_RESTORE}")


def not_a_database(path: Path, exc: sqlite3.DatabaseError) -> DamagedDatabaseError:
    """The error for a file SQLite cannot read at all (random bytes, a text file, an encrypted file)."""
    return DamagedDatabaseError(f"{path} is not an EvoDAG database file ({exc}); {_RESTORE}")


def quick_check(conn: sqlite3.Connection, path: Path) -> None:
    """`PRAGMA quick_check` (page structure, not index contents: about 2 ms per MB)."""
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB:
            raise not_a_database(path, exc) from exc
        problems = [str(exc)]
    if problems != ["ok"]:
        detail = "; ".join(str(p) for p in problems)[:300]
        raise DamagedDatabaseError(f"{path} failed its integrity check ({detail}); {_RESTORE}")


def check_foreign(conn: sqlite3.Connection, path: Path, found_version: int) -> None:
    """A file at schema version 0 must be empty: tables without our version stamp belong to someone else."""
    if found_version != 0:
        return
    (tables,) = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    if tables:
        raise EvoDAGError(f"{path} is an SQLite file but not an EvoDAG database (no schema version); leave it alone "
                          "and point saddler at a run's evodag.sqlite")  # fmt: skip


def check_tables(conn: sqlite3.Connection, path: Path) -> None:
    """Every record table exists with (at least) the columns its record has."""
    for cls, table in codec.TABLE_OF.items():
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if not have:
            raise DamagedDatabaseError(f"{path}: table {table} is missing; {_RESTORE}")
        missing = [c for c in codec.columns(cls) if c not in have]
        if missing:
            raise DamagedDatabaseError(f"{path}: table {table} lacks column(s) {', '.join(missing)}; {_RESTORE}")


def check_rows(conn: sqlite3.Connection, path: Path) -> None:
    """Decode every row of every record table (and each cache payload); the first bad value raises
    `CorruptRowError` naming the file, table, row and column."""
    try:
        for cls, table in codec.TABLE_OF.items():
            decode: Callable[[tuple[Any, ...]], object] = codec.decoder(cls)
            for row in conn.execute(f"SELECT {codec.select_list(cls)} FROM {table}"):
                decode(row)
        for key, payload in conn.execute("SELECT cache_key, payload FROM rollout_cache"):
            codec.cache_payload(key, payload)
    except CorruptRowError as exc:
        raise CorruptRowError(exc.table, exc.row_id, exc.column, exc.problem, str(path)) from None


_SQL_OK = {  # the stored values `codec.decoder` accepts for each kind, as comparisons on a non-NULL column {c}:
    # SQLite orders NULL < numbers < text < blobs, and column affinity has already turned numeric text into numbers
    # (INTEGER / REAL columns) and numbers into text (TEXT columns), so comparisons say the type without a function
    "int": "{c} = CAST({c} AS INTEGER)",
    "float": "({c} >= -1e999 AND {c} <= 1e999)",
    "str": "({c} >= '' AND {c} < X'')",
    "bool": "{c} IN (0, 1)",
    "dict": "CASE WHEN {c} >= '' AND {c} < X'' AND json_valid({c}) THEN json_type({c}) = 'object' ELSE 0 END",
    "list": "CASE WHEN {c} >= '' AND {c} < X'' AND json_valid({c}) THEN json_type({c}) = 'array' ELSE 0 END",
}


def _bad_row_sql(cls: type) -> str:
    """The first row after `?` holding a value its record's decoder may refuse (it is then decoded to say which)."""
    conditions = []
    for name, kind, nullable in codec.column_kinds(cls):
        if kind == "any" or name == "id":  # an INTEGER PRIMARY KEY is always an integer
            continue
        column = f'"{name}"'
        ok = _SQL_OK[kind].format(c=column)
        conditions.append(f"NOT ({column} IS NULL OR {ok})" if nullable else f"NOT ({column} IS NOT NULL AND {ok})")
    where = " OR ".join(conditions) or "0"
    return f"SELECT {codec.select_list(cls)} FROM {codec.TABLE_OF[cls]} WHERE id > ? AND ({where}) ORDER BY id LIMIT 1"


def check_values(conn: sqlite3.Connection, path: Path) -> None:
    """Every stored value fits its column's type (the rules of `codec.decoder`, run as one SQL scan per table);
    the first bad one raises `CorruptRowError` naming the file, table, row and column."""
    try:
        for cls in codec.TABLE_OF:
            sql, after = _bad_row_sql(cls), -1
            while (row := conn.execute(sql, (after,)).fetchone()) is not None:
                codec.decoder(cls)(row)  # raises, naming the column (SQLite's JSON is stricter than Python's:
                after = row[0]  # a row the decoder accepts is sound, and the scan goes on after it)
        bad = conn.execute(
            "SELECT cache_key, payload FROM rollout_cache WHERE NOT (typeof(payload) = 'text' AND "
            "CASE WHEN json_valid(payload) THEN json_type(payload) = 'object' ELSE 0 END) LIMIT 1"
        ).fetchone()
        if bad is not None:
            codec.cache_payload(*bad)
    except CorruptRowError as exc:
        raise CorruptRowError(exc.table, exc.row_id, exc.column, exc.problem, str(path)) from None

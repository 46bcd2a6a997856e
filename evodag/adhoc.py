"""Ad-hoc read-only SQL over an EvoDAG (`evo-dag query`), through sqlite-utils' `Database.query`.

A `mode=ro` connection still lets SQL attach (and so create) other files, change settings with PRAGMA and make
temporary tables, so an authorizer allows only what a read needs: SELECT, reading columns, functions and
recursive CTEs. Anything else fails at prepare time, before a single row is read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from itertools import islice
from typing import Any

from evodag.errors import EvoDAGError

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


class QueryRefused(EvoDAGError):
    """The SQL does something other than read (exit code 2: the user's input)."""

    exit_code = 2


class QueryFailed(EvoDAGError):
    """SQLite rejected the SQL (a syntax error, an unknown table or column, a missing parameter)."""

    exit_code = 2


def _reads_only(action: int, *_args: object) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def run_query(conn: sqlite3.Connection, sql: str, params: Mapping[str, Any], max_rows: int) -> dict[str, Any]:
    """`{"columns": [...], "rows": [{column: value}], "truncated": bool}` for one read-only statement; at most
    `max_rows` rows (`truncated` says whether more were there). `QueryRefused` for anything but a read,
    `QueryFailed` for SQL that SQLite rejects. The authorizer is removed again before returning."""
    from sqlite_utils import Database

    database = Database(conn)  # before the authorizer: opening it runs PRAGMAs of its own
    conn.set_authorizer(_reads_only)
    try:
        cursor = database.execute(sql, dict(params))
        columns = [c[0] for c in cursor.description or ()]
        rows = [dict(zip(columns, row, strict=True)) for row in islice(cursor, max_rows + 1)]
    except sqlite3.DatabaseError as exc:
        if "not authorized" in str(exc):
            raise QueryRefused(f"query refused: only a read (SELECT / WITH) may run here ({exc})") from None
        raise QueryFailed(f"query failed: {exc}") from None
    finally:
        conn.set_authorizer(None)
    return {"columns": columns, "rows": rows[:max_rows], "truncated": len(rows) > max_rows}


def query_text(doc: Mapping[str, Any]) -> str:
    """Tab-separated: a header line, one line per row (NULL as empty), and a note when rows were cut."""
    lines = ["\t".join(doc["columns"])]
    lines += ["\t".join("" if v is None else str(v) for v in row.values()) for row in doc["rows"]]
    if doc["truncated"]:
        lines.append(f"(cut at {len(doc['rows'])} rows: raise --max-rows or narrow the query)")
    return "\n".join(lines)

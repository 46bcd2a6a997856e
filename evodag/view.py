"""The session view: what optimizer sessions may see of a run, as an EvoDAG file of its own.

Held-out data is sealed by construction: sessions query a projection that does not hold it, so no `evo-dag`
subcommand or flag can show it, whatever it asks. `write_session_view(source, dest)` copies one run of `source`
into a new store at `dest` with:

- the run, its nodes (test scores cleared: `HELD_OUT_NODE_FIELDS`), edges with their per-task transitions and
  diffs, iterations, lessons and sessions (with their stored answers);
- train rollouts only: dev appears only as each node's aggregate (`dev_mean`, `dev_std`), test not at all;
- no rollout cache, and of the event log only the kinds the session queries read (`VIEW_EVENT_KINDS`).

Nothing held out is ever written to the file (no rows deleted afterwards, so no bytes left in free pages). It is
built under a temporary name in the rollback-journal mode and renamed into place: a reader opens the previous view
or the new one, never half of one. People keep the full view: `evo-dag` on the run's own `evodag.sqlite`.
"""

from __future__ import annotations

import os
from pathlib import Path

from evodag import codec
from evodag.history import HISTORY_EVENT_KINDS
from evodag.models import Edge, Iteration, Lesson, Node, RolloutRow, Run, SessionRow
from evodag.store import EvoDAG

HELD_OUT_NODE_FIELDS = ("test_mean", "test_std")
"""Node columns that hold test results: cleared in every copy of a run sessions or a fork can read."""
SEARCH_SPLIT = "train"
"""The only split whose per-task rollouts a session may see (dev only as node aggregates, test never)."""
VIEW_EVENT_KINDS = HISTORY_EVENT_KINDS
"""The events a session view keeps: those `evo-dag history` reads (no other session-facing query reads events)."""


def _columns_without(cls: type, cleared: tuple[str, ...]) -> tuple[str, str]:
    """(target column list, source select list) copying `cls`'s columns with `cleared` ones set to NULL."""
    names = codec.columns(cls)
    target = ", ".join(f'"{c}"' for c in names)
    select = ", ".join("NULL" if c in cleared else f'"{c}"' for c in names)
    return target, select


def write_session_view(source: EvoDAG, dest: Path, run_id: int | None = None) -> Path:
    """Write the session view of run `run_id` (default: the latest) of `source` to `dest` (see the module
    docstring), replacing the previous one atomically; returns `dest`."""
    rid = source._run_or_latest(run_id)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.new-{os.getpid()}")
    for leftover in dest.parent.glob(f".{dest.name}.new-*"):  # a killed writer's (one run writes its view at once)
        leftover.unlink(missing_ok=True)
    try:
        with EvoDAG(tmp, clock=source.clock) as out:
            out.conn.execute("ATTACH DATABASE ? AS src", (str(Path(source.path).resolve()),))
            try:
                with out.transaction():
                    _copy(out, rid)
            finally:
                out.conn.execute("DETACH DATABASE src")
            out.conn.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _copy(out: EvoDAG, rid: int) -> None:
    conn = out.conn
    run = f"run_id = {int(rid)}"
    target, select = _columns_without(Run, ())
    conn.execute(f"INSERT INTO runs ({target}) SELECT {select} FROM src.runs WHERE id = {int(rid)}")
    conn.execute(
        f"""INSERT INTO blobs SELECT * FROM src.blobs WHERE sha IN (SELECT diff_sha FROM src.edges WHERE {run}
            UNION SELECT change_sha FROM src.sessions WHERE {run} AND change_sha IS NOT NULL)"""
    )
    target, select = _columns_without(Node, HELD_OUT_NODE_FIELDS)
    conn.execute(f"INSERT INTO nodes ({target}) SELECT {select} FROM src.nodes WHERE {run}")
    for cls in (Edge, Iteration, Lesson, SessionRow):
        target, select = _columns_without(cls, ())
        table = codec.TABLE_OF[cls]
        conn.execute(f"INSERT INTO {table} ({target}) SELECT {select} FROM src.{table} WHERE {run}")
    conn.execute("INSERT INTO edge_tasks SELECT * FROM src.edge_tasks WHERE edge_id IN (SELECT id FROM edges)")
    target, select = _columns_without(RolloutRow, ())
    conn.execute(
        f"INSERT INTO rollouts ({target}) SELECT {select} FROM src.rollouts WHERE {run} AND split = ?", (SEARCH_SPLIT,)
    )
    kinds = ", ".join("?" for _ in VIEW_EVENT_KINDS)
    conn.execute(f"INSERT INTO events SELECT * FROM src.events WHERE {run} AND kind IN ({kinds})", VIEW_EVENT_KINDS)

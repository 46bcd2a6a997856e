"""The whole EvoDAG SQLite schema as an ordered list of migrations.

`PRAGMA user_version` records how many migrations a file has; `migrate()` applies only the missing ones,
each atomically. Never edit a released migration: append a new one. Table columns are the fields of the
dataclasses in `evodag.models` (JSON text for lists/dicts, 0/1 for booleans); `edge_tasks` and `run_stats`
are derived tables kept current by the store and by triggers so the CLI's queries stay index-only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from evodag.errors import SchemaVersionError

Step = str | Callable[[sqlite3.Connection], None]

_V1: list[Step] = [
    """CREATE TABLE runs (
        id INTEGER PRIMARY KEY, config TEXT NOT NULL DEFAULT '{}', seed INTEGER NOT NULL, started_at TEXT NOT NULL,
        finished_at TEXT, termination_reason TEXT, best_node_id INTEGER, baseline_node_id INTEGER,
        status TEXT NOT NULL DEFAULT 'running')""",
    """CREATE TABLE nodes (
        id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), "commit" TEXT NOT NULL,
        parent_id INTEGER REFERENCES nodes(id), iteration INTEGER NOT NULL, phase TEXT NOT NULL,
        patch_kind TEXT NOT NULL, origin TEXT NOT NULL, status TEXT NOT NULL, status_reason TEXT NOT NULL DEFAULT '',
        batch_before REAL, batch_after REAL, dev_mean REAL, dev_std REAL, test_mean REAL, test_std REAL,
        hypothesis TEXT, lines_changed INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL)""",
    "CREATE INDEX nodes_run ON nodes(run_id, status)",
    "CREATE INDEX nodes_parent ON nodes(parent_id)",
    'CREATE INDEX nodes_commit ON nodes("commit")',
    "CREATE INDEX nodes_best_dev ON nodes(run_id, dev_mean DESC, lines_changed, id) WHERE dev_mean IS NOT NULL",
    "CREATE INDEX nodes_best_test ON nodes(run_id, test_mean DESC, lines_changed, id) WHERE test_mean IS NOT NULL",
    """CREATE TABLE blobs (sha TEXT PRIMARY KEY, content TEXT NOT NULL)""",
    """CREATE TABLE edges (
        id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),
        parent_id INTEGER NOT NULL REFERENCES nodes(id), child_id INTEGER NOT NULL REFERENCES nodes(id),
        kind TEXT NOT NULL, diff_sha TEXT NOT NULL REFERENCES blobs(sha), files_changed TEXT NOT NULL DEFAULT '[]',
        lines_added INTEGER NOT NULL DEFAULT 0, lines_removed INTEGER NOT NULL DEFAULT 0,
        fixed TEXT NOT NULL DEFAULT '[]', regressed TEXT NOT NULL DEFAULT '[]',
        still_failing TEXT NOT NULL DEFAULT '[]', still_passing TEXT NOT NULL DEFAULT '[]',
        source_edge_id INTEGER REFERENCES edges(id), created_at TEXT NOT NULL)""",
    "CREATE INDEX edges_run ON edges(run_id)",
    "CREATE INDEX edges_parent ON edges(parent_id)",
    "CREATE INDEX edges_child ON edges(child_id)",
    """CREATE TABLE edge_tasks (
        edge_id INTEGER NOT NULL REFERENCES edges(id), task_id TEXT NOT NULL, category TEXT NOT NULL,
        PRIMARY KEY (edge_id, task_id, category))""",
    "CREATE INDEX edge_tasks_task ON edge_tasks(task_id)",
    """CREATE TABLE rollouts (
        id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),
        node_id INTEGER NOT NULL REFERENCES nodes(id), task_id TEXT NOT NULL, split TEXT NOT NULL,
        seed INTEGER NOT NULL, repetition INTEGER NOT NULL, score REAL NOT NULL, passed INTEGER NOT NULL,
        disposition TEXT NOT NULL, cost REAL NOT NULL DEFAULT 0, llm_calls INTEGER NOT NULL DEFAULT 0,
        duration_s REAL NOT NULL DEFAULT 0, trace_path TEXT, error_tail TEXT NOT NULL DEFAULT '',
        rationale TEXT NOT NULL DEFAULT '', failure_file TEXT, task_group TEXT NOT NULL DEFAULT '',
        cache_key TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL)""",
    "CREATE INDEX rollouts_node ON rollouts(node_id, split, task_id)",
    "CREATE INDEX rollouts_task ON rollouts(task_id, node_id)",
    "CREATE INDEX rollouts_run ON rollouts(run_id, split)",
    "CREATE INDEX rollouts_cache ON rollouts(cache_key) WHERE cache_key != ''",
    "CREATE UNIQUE INDEX rollouts_once ON rollouts(run_id, node_id, cache_key) WHERE cache_key != ''",
    """CREATE TABLE lessons (
        id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), node_id INTEGER REFERENCES nodes(id),
        edge_id INTEGER REFERENCES edges(id), iteration INTEGER, task_id TEXT, category TEXT NOT NULL,
        attribution TEXT NOT NULL, text TEXT NOT NULL, created_at TEXT NOT NULL)""",
    "CREATE INDEX lessons_run ON lessons(run_id)",
    "CREATE INDEX lessons_node ON lessons(node_id)",
    "CREATE INDEX lessons_edge ON lessons(edge_id)",
    "CREATE INDEX lessons_task ON lessons(task_id)",
    """CREATE TABLE sessions (
        id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), iteration INTEGER,
        node_id INTEGER REFERENCES nodes(id), role TEXT NOT NULL, backend TEXT NOT NULL,
        model TEXT NOT NULL DEFAULT '', turns INTEGER NOT NULL DEFAULT 0, tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0, duration_s REAL NOT NULL DEFAULT 0,
        transcript_path TEXT, outcome TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL)""",
    "CREATE INDEX sessions_run ON sessions(run_id, iteration)",
    """CREATE TABLE iterations (
        id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), number INTEGER NOT NULL,
        epoch INTEGER NOT NULL, batch TEXT NOT NULL DEFAULT '[]', parent_id INTEGER REFERENCES nodes(id),
        candidate_id INTEGER REFERENCES nodes(id), phase TEXT NOT NULL DEFAULT '', step TEXT NOT NULL DEFAULT 'started',
        decision TEXT, stall_count INTEGER NOT NULL DEFAULT 0, exploration INTEGER NOT NULL DEFAULT 0,
        started_at TEXT NOT NULL, finished_at TEXT)""",
    "CREATE INDEX iterations_run ON iterations(run_id, number)",
    """CREATE TABLE events (
        id INTEGER PRIMARY KEY, run_id INTEGER, ts TEXT NOT NULL, kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}')""",
    "CREATE INDEX events_run ON events(run_id, id)",
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END",
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END",
    """CREATE TABLE rollout_cache (cache_key TEXT PRIMARY KEY, payload TEXT NOT NULL, created_at TEXT NOT NULL)""",
    """CREATE TABLE run_stats (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id), rollouts INTEGER NOT NULL DEFAULT 0,
        rollout_cost REAL NOT NULL DEFAULT 0, sessions INTEGER NOT NULL DEFAULT 0,
        session_cost REAL NOT NULL DEFAULT 0)""",
    "CREATE TRIGGER run_stats_new AFTER INSERT ON runs BEGIN INSERT INTO run_stats(run_id) VALUES (NEW.id); END",
    """CREATE TRIGGER run_stats_rollout AFTER INSERT ON rollouts BEGIN
        UPDATE run_stats SET rollouts = rollouts + 1, rollout_cost = rollout_cost + NEW.cost
        WHERE run_id = NEW.run_id; END""",
    """CREATE TRIGGER run_stats_session AFTER INSERT ON sessions BEGIN
        UPDATE run_stats SET sessions = sessions + 1, session_cost = session_cost + NEW.cost_usd
        WHERE run_id = NEW.run_id; END""",
]

_V2: list[Step] = [
    # "latest iteration" and "rows of one task/node in a run" must not scan the whole run: without ANALYZE
    # statistics SQLite prefers the index with the most equality columns, so the selective ones get run_id too
    "CREATE INDEX iterations_run_id ON iterations(run_id, id)",
    "DROP INDEX lessons_task",
    "CREATE INDEX lessons_task ON lessons(task_id, run_id)",
    "DROP INDEX rollouts_task",
    "CREATE INDEX rollouts_task ON rollouts(task_id, run_id, node_id)",
    "DROP INDEX rollouts_run",  # it beat rollouts_node for (run, node, split) lookups; whole-run reads scan anyway
]

_V3: list[Step] = [
    # a session is paid for once: keyed by (run, iteration, role, attempt), with its validated answer (JSON, without
    # stats) and, for diagnosis, the worktree change it made (a binary-safe diff in `blobs`), so a resumed run
    # replays it instead of calling the backend again. Rows written before V3 (and by the seed modes) have no key.
    "ALTER TABLE sessions ADD COLUMN attempt INTEGER",
    "ALTER TABLE sessions ADD COLUMN result TEXT",
    "ALTER TABLE sessions ADD COLUMN change_sha TEXT REFERENCES blobs(sha)",
    "CREATE UNIQUE INDEX sessions_once ON sessions(run_id, iteration, role, attempt) WHERE attempt IS NOT NULL",
    # the run's results-affecting inputs (config keys, harness baseline, benchmark fingerprint) as a JSON object
    "ALTER TABLE runs ADD COLUMN inputs TEXT",
]

_V4: list[Step] = [
    # the loop asks for the events of one kind (its own milestones) every iteration; every state change is an event
    # too, so without this index that question reads the whole log
    "CREATE INDEX events_kind ON events(run_id, kind, id)",
]

_V5: list[Step] = [
    # every acceptance decision stores its evidence (the paired comparison over the batch and the rounds a close
    # call gathered on more train tasks), the rollouts it cost and its confidence: a JSON object (saddler.run.closecall)
    "ALTER TABLE iterations ADD COLUMN evidence TEXT",
    # the newest rollout id when the iteration finished: a fork copies exactly the rollouts the run held then
    "ALTER TABLE iterations ADD COLUMN last_rollout INTEGER",
]

_V6: list[Step] = [
    # how many times the session's CLI (or SDK query) was run: 1 + the retries of transient API errors; NULL for
    # rows written before V6 and by the seed modes
    "ALTER TABLE sessions ADD COLUMN cli_attempts INTEGER",
]

_V7: list[Step] = [
    # several iterations run at once (saddler.run.loop): the order they finished in (1, 2, ...), and how many had
    # finished when each started, which "the latest kept node" and the stall count are read from
    "ALTER TABLE iterations ADD COLUMN finish_order INTEGER",
    "ALTER TABLE iterations ADD COLUMN started_after INTEGER",
    # a dev evaluation that stopped once its outcome was decided (a dev race) covers fewer than the dev split's
    # tasks: how many it covers (NULL: the whole split, as every node before V7)
    "ALTER TABLE nodes ADD COLUMN dev_tasks INTEGER",
]

MIGRATIONS: list[list[Step]] = [_V1, _V2, _V3, _V4, _V5, _V6, _V7]
"""Ordered migrations; migration i (0-based) brings `user_version` from i to i+1."""

LATEST = len(MIGRATIONS)
READABLE_FROM = 7
"""The oldest version read-only openers accept: migrations after it only add or drop indexes. Raise it to the
new LATEST whenever a migration changes tables or columns."""


def version(conn: sqlite3.Connection) -> int:
    """The number of migrations applied to this file (0 for a new, empty file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, migrations: Sequence[Sequence[Step]] = MIGRATIONS) -> int:
    """Apply the missing migrations (each in its own IMMEDIATE transaction) and return the new version.

    Safe to call from several processes at once: the version is re-read under the write lock.
    Raises `SchemaVersionError` if the file is newer than this code.
    """
    while True:
        current = version(conn)
        if current > len(migrations):
            raise SchemaVersionError(
                f"database schema version {current} is newer than this evodag ({len(migrations)}); upgrade saddler"
            )
        if current == len(migrations):
            return current
        conn.execute("BEGIN IMMEDIATE")
        try:
            if version(conn) != current:  # another process migrated meanwhile
                conn.execute("ROLLBACK")
                continue
            for step in migrations[current]:
                if isinstance(step, str):
                    conn.execute(step)
                else:
                    step(conn)
            conn.execute(f"PRAGMA user_version = {current + 1}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

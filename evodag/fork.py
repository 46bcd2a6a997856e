"""Copy a run's history up to the end of one iteration into a new EvoDAG file (`saddler fork`).

The new file holds the run (same id, status `paused`, no best recorded yet: the forking side records it) and,
as they stood when iteration N finished: nodes of iterations 0..N (test scores cleared: test is opened at the
end of a run), their edges and blobs, the iterations, lessons and sessions (with their stored answers and
changes) of iterations 1..N, the rollouts those iterations used (train rollouts of each iteration's parent and
candidate on the tasks it compared, its batch and any close-call evidence; dev rollouts of the copied nodes; only
rows the run held when iteration N finished) and the events logged up to that moment. Every other train or dev
rollout of the source run goes to the new file's `rollout_cache`, so a fork that evaluates the same harness on the
same task and seed reuses it instead of paying again. Ids are kept, so every reference stays valid.

A fork carries no test data in any form: no test rollout (not even in its cache), no test score on a node, no
event field holding one (`evodag.view.HELD_OUT_NODE_FIELDS` are removed from every payload, and a node update
that held nothing else is left out). The fork's sessions start from a history that never saw test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from evodag import codec
from evodag.errors import InvalidValueError
from evodag.history import compared_tasks
from evodag.models import Iteration, RolloutRow, Run
from evodag.store import EvoDAG
from evodag.view import HELD_OUT_NODE_FIELDS

Rewrite = Callable[[str | None], str | None]
_CACHED = ("score", "passed", "disposition", "llm_calls", "duration_s", "trace_path", "error_tail", "rationale",
           "failure_file", "task_group")  # fmt: skip


def _boundary(source: EvoDAG, run_id: int, iterations: list[Iteration], n: int) -> int:
    """The id of the last event of the history up to iteration `n`."""
    if n == 0:
        first = next((it for it in iterations if it.number == 1), None)
        started = [e.id for e in source.events(run_id=run_id, kind="iteration.started")
                   if first and e.payload.get("id") == first.id]  # fmt: skip
        if started:
            return started[0] - 1
        (last_id,) = source.conn.execute(
            "SELECT coalesce(max(id), 0) FROM events WHERE run_id = ?", (run_id,)
        ).fetchone()
        return int(last_id)
    last = next(it for it in iterations if it.number == n)
    finished = [
        e.id
        for e in source.events(run_id=run_id, kind="iteration.updated")
        if e.payload.get("id") == last.id and e.payload.get("finished_at")
    ]
    return finished[-1]


def fork_store(
    source: EvoDAG, dest: Path, up_to_iteration: int, *, run_id: int | None = None, rewrite: Rewrite | None = None
) -> Run:
    """Write the history of run `run_id` (default: the latest) up to iteration `up_to_iteration` into a new store
    at `dest` (see the module docstring); `rewrite` maps stored file paths (traces, transcripts) to the new
    folder's. Raises `InvalidValueError` when that iteration has not finished."""
    rid = source._run_or_latest(run_id)
    its = source.iterations(run_id=rid)
    finished = [it.number for it in its if it.finished_at is not None]
    done = len(finished)
    if not 0 <= up_to_iteration <= done or finished != list(range(1, done + 1)):
        raise InvalidValueError(
            f"cannot fork from iteration {up_to_iteration}: the run has finished iterations 1..{done}; choose 0..{done}"
        )
    if Path(dest).exists():
        raise InvalidValueError(f"{dest} already exists; fork into a new file")
    boundary = _boundary(source, rid, its, up_to_iteration)
    keep = [it for it in its if it.number <= up_to_iteration]
    node_ids = {n.id for n in source.nodes(run_id=rid) if n.iteration <= up_to_iteration}
    used = {
        (node, task)
        for it in keep
        for node in (it.parent_id, it.candidate_id)
        if node
        for task in compared_tasks(it.batch, it.evidence)
    }
    last = keep[-1].last_rollout if keep else None  # newer runs say which rollouts the run held then
    path_of = rewrite or (lambda p: p)
    with EvoDAG(dest, clock=source.clock) as out:
        out.conn.execute("ATTACH DATABASE ? AS src", (str(Path(source.path).resolve()),))
        try:
            with out.transaction():
                _copy(out, rid, up_to_iteration, boundary, node_ids, used, path_of, last)
        finally:
            out.conn.execute("DETACH DATABASE src")
        return out.get_run(rid)


def _copy(
    out: EvoDAG,
    rid: int,
    n: int,
    boundary: int,
    nodes: set[int],
    used: set[tuple[int, str]],
    path_of: Rewrite,
    last: int | None,
) -> None:
    conn = out.conn
    ids = ",".join(str(i) for i in sorted(nodes)) or "NULL"
    conn.execute(
        "INSERT INTO runs (id, config, seed, started_at, baseline_node_id, status, inputs) "
        "SELECT id, config, seed, started_at, baseline_node_id, 'paused', inputs FROM src.runs WHERE id = ?",
        (rid,),
    )
    edges = f"src.edges WHERE run_id = {int(rid)} AND child_id IN ({ids})"
    sessions = f"src.sessions WHERE run_id = {int(rid)} AND (iteration <= {int(n)} OR iteration IS NULL)"
    conn.execute(
        f"INSERT INTO blobs SELECT * FROM src.blobs WHERE sha IN (SELECT diff_sha FROM {edges} "
        f"UNION SELECT change_sha FROM {sessions} AND change_sha IS NOT NULL)"
    )
    conn.execute(f"INSERT INTO nodes SELECT * FROM src.nodes WHERE run_id = ? AND id IN ({ids})", (rid,))
    conn.execute("UPDATE nodes SET test_mean = NULL, test_std = NULL")
    conn.execute(f"INSERT INTO edges SELECT * FROM {edges}")
    conn.execute("INSERT INTO edge_tasks SELECT * FROM src.edge_tasks WHERE edge_id IN (SELECT id FROM edges)")
    conn.execute("INSERT INTO iterations SELECT * FROM src.iterations WHERE run_id = ? AND number <= ?", (rid, n))
    conn.execute("INSERT INTO lessons SELECT * FROM src.lessons WHERE run_id = ? AND iteration <= ?", (rid, n))
    conn.execute(f"INSERT INTO sessions SELECT * FROM {sessions}")
    _copy_events(out, rid, boundary)
    for sid, path in conn.execute("SELECT id, transcript_path FROM sessions").fetchall():
        conn.execute("UPDATE sessions SET transcript_path = ? WHERE id = ?", (path_of(path), sid))
    _copy_rollouts(out, rid, nodes, used, path_of, last)


def _copy_events(out: EvoDAG, rid: int, boundary: int) -> None:
    """The events up to `boundary` without any held-out field (a node update that held only test scores is left
    out: what remains would say only when test ran)."""
    paths = ", ".join(f"'$.{name}'" for name in HELD_OUT_NODE_FIELDS)
    held = " OR ".join(f"json_type(payload, '$.{name}') IS NOT NULL" for name in HELD_OUT_NODE_FIELDS)
    out.conn.execute(
        f"""INSERT INTO events (id, run_id, ts, kind, payload)
            SELECT id, run_id, ts, kind, CASE WHEN {held} THEN json_remove(payload, {paths}) ELSE payload END
            FROM src.events WHERE run_id = ? AND id <= ?
            AND NOT (kind = 'node.updated' AND ({held})
                     AND json_remove(payload, '$.id', {paths}) = '{{}}')""",
        (rid, boundary),
    )


def _copy_rollouts(
    out: EvoDAG, rid: int, nodes: set[int], used: set[tuple[int, str]], path_of: Rewrite, last: int | None
) -> None:
    """The rollouts iterations 0..N used (each iteration's parent and candidate on the tasks it compared, dev of the
    copied nodes; when iteration N recorded its `last_rollout`, only rows the run held then) are copied; every other
    train or dev one with a cache key goes to `rollout_cache`; test ones nowhere."""
    conn = out.conn
    cols = codec.select_list(RolloutRow)
    names = codec.columns(RolloutRow)
    insert = f"INSERT INTO rollouts ({cols}) VALUES ({', '.join('?' for _ in names)})"
    trace = names.index("trace_path")
    rows = conn.execute(f"SELECT {cols} FROM src.rollouts WHERE run_id = ? ORDER BY id", (rid,)).fetchall()
    decode = codec.decoder(RolloutRow)
    cached: dict[str, dict[str, Any]] = {}
    for raw in rows:
        row = decode(raw)
        if (
            row.node_id in nodes
            and (last is None or row.id <= last)
            and (row.split == "dev" or (row.split == "train" and (row.node_id, row.task_id) in used))
        ):
            conn.execute(insert, (*raw[:trace], path_of(row.trace_path), *raw[trace + 1 :]))
        elif row.cache_key and row.split != "test":
            cached.setdefault(row.cache_key, {c: getattr(row, c) for c in _CACHED})
    for key, payload in cached.items():
        conn.execute(
            "INSERT OR IGNORE INTO rollout_cache (cache_key, payload, created_at) VALUES (?, ?, ?)",
            (key, codec.dumps(payload), out.clock()),
        )

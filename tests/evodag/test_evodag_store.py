"""EvoDAG store: migrations, round-trips (hypothesis), idempotence, events, transactions, errors, read-only mode."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evodag.errors import (
    EvoDAGError,
    InvalidValueError,
    MissingDatabaseError,
    SchemaVersionError,
    UnknownEdgeError,
    UnknownNodeError,
    UnknownRunError,
)
from evodag.models import ATTRIBUTIONS, DISPOSITIONS, EDGE_KINDS, LESSON_CATEGORIES, NODE_STATUSES, SPLITS
from evodag.schema import LATEST, MIGRATIONS, READABLE_FROM, migrate, version
from evodag.store import EvoDAG, diff_sha

TABLES = {"runs", "nodes", "edges", "blobs", "rollouts", "lessons", "sessions", "iterations", "events",
          "rollout_cache", "edge_tasks", "run_stats"}  # fmt: skip
SETTINGS = settings(max_examples=40, deadline=None)

ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
small = st.integers(min_value=0, max_value=10**6)
floats = st.floats(allow_nan=False, allow_infinity=False)
texts = st.text(max_size=40)
ids = st.lists(st.text(min_size=1, max_size=12), max_size=6)
json_values = st.recursive(
    st.none() | st.booleans() | ints | floats | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=10,
)
json_dicts = st.dictionaries(texts, json_values, max_size=5)


@pytest.fixture
def store(tmp_path: Path, counting_clock: Callable[..., Callable[[], str]]) -> Any:
    with EvoDAG(tmp_path / "evodag.sqlite", clock=counting_clock()) as s:
        yield s


def _root(s: EvoDAG) -> tuple[int, int]:
    run = s.create_run({"k": 1}, seed=3).id
    return run, s.add_node(run, "root", None, 0, "baseline", "baseline", "baseline", status="baseline").id


# migrations ----------------------------------------------------------------------------------------
def test_migrations_from_empty_db_and_idempotent_reopen(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    with EvoDAG(path) as s:
        names = {r[0] for r in s.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert names >= TABLES
        assert version(s.conn) == LATEST == len(MIGRATIONS)
        assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        s.create_run({}, 1)
    with EvoDAG(path) as s:
        assert version(s.conn) == LATEST
        assert len(s.conn.execute("SELECT * FROM runs").fetchall()) == 1


def test_migrate_applies_only_missing_steps(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "m.sqlite", isolation_level=None)
    first = [["CREATE TABLE a (x INTEGER)"]]
    assert migrate(conn, first) == 1
    calls: list[int] = []
    second = [*first, ["CREATE TABLE b (y INTEGER)", lambda c: calls.append(version(c))]]
    assert migrate(conn, second) == 2
    assert migrate(conn, second) == 2
    assert calls == [1]
    with pytest.raises(SchemaVersionError, match="newer"):
        migrate(conn, first)


def test_failed_migration_rolls_back(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "m.sqlite", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, [["CREATE TABLE a (x INTEGER)", "NOT SQL"]])
    assert version(conn) == 0
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'a'").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("sql", "index"),
    [
        ("SELECT * FROM rollouts WHERE run_id = 1 AND node_id = 2 AND split = 'test'", "rollouts_node"),
        ("SELECT * FROM rollouts WHERE task_id = 't' AND run_id = 1", "rollouts_task"),
        ("SELECT * FROM rollouts WHERE cache_key = 'k' AND cache_key != '' ORDER BY id", "rollouts_cache"),
        ("SELECT * FROM rollouts WHERE run_id = 1 AND node_id = 2 AND cache_key = 'k' AND cache_key != ''",
         "rollouts_once"),
        ("SELECT * FROM lessons WHERE run_id = 1 AND task_id = 't'", "lessons_task"),
        ("SELECT * FROM lessons WHERE run_id = 1 AND node_id = 2", "lessons_node"),
        ("SELECT * FROM iterations WHERE run_id = 1 ORDER BY id DESC LIMIT 1", "iterations_run_id"),
        ("SELECT * FROM nodes WHERE run_id = 1 AND dev_mean IS NOT NULL ORDER BY dev_mean DESC, lines_changed, id",
         "nodes_best_dev"),
        ("SELECT * FROM edge_tasks WHERE task_id = 't'", "edge_tasks_task"),
    ],
)  # fmt: skip
def test_hot_queries_use_their_index(store: EvoDAG, sql: str, index: str) -> None:
    plan = " ".join(row[3] for row in store.conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
    assert f"INDEX {index} " in plan, plan


# read-only mode ------------------------------------------------------------------------------------
def test_readonly_missing_file_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(MissingDatabaseError, match=r"pass --db PATH, set EVODAG_DB"):
        EvoDAG(tmp_path / "nope.sqlite", readonly=True)
    assert not (tmp_path / "nope.sqlite").exists()


def test_readonly_refuses_writes_and_foreign_files(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    EvoDAG(path).close()
    with EvoDAG(path, readonly=True) as ro:
        with pytest.raises(EvoDAGError, match="read-only"):
            ro.create_run({}, 1)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            ro.conn.execute("CREATE TABLE x (y)")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(EvoDAGError, match="not an EvoDAG database"):
        EvoDAG(other, readonly=True)


def test_readonly_refuses_other_schema_versions(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    with EvoDAG(path) as s:
        s.conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    with pytest.raises(
        SchemaVersionError, match=f"schema version {LATEST + 1}, this evodag reads {READABLE_FROM}..{LATEST}"
    ):
        EvoDAG(path, readonly=True)
    with pytest.raises(SchemaVersionError, match="newer than this evodag"):
        EvoDAG(path)


def test_readonly_reads_a_file_one_index_migration_behind(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:READABLE_FROM])
    conn.execute("INSERT INTO runs (config, seed, started_at) VALUES ('{}', 5, 't')")
    conn.close()
    with EvoDAG(path, readonly=True) as ro:
        assert (version(ro.conn), ro.get_run().seed, ro.summary()["rollouts"]) == (
            READABLE_FROM,
            5,
            {"count": 0, "cost": 0, "infra_errors": 0},
        )
    with EvoDAG(path) as rw:
        assert version(rw.conn) == LATEST


# round-trips ---------------------------------------------------------------------------------------
def test_run_roundtrip(store: EvoDAG) -> None:
    @SETTINGS
    @given(json_dicts, ints, st.sampled_from(["running", "paused", "finished", "failed"]), st.none() | texts)
    def check(config: dict[str, Any], seed: int, status: str, reason: str | None) -> None:
        run = store.create_run(config, seed)
        assert (run.config, run.seed, run.status) == (config, seed, "running")
        assert store.get_run() == run == store.get_run(run.id)
        done = store.update_run(run.id, status=status, termination_reason=reason, finished_at="t")
        assert (done.status, done.termination_reason, done.finished_at) == (status, reason, "t")
        assert store.get_run(run.id) == done

    check()


def test_node_roundtrip(store: EvoDAG) -> None:
    run, root = _root(store)

    @SETTINGS
    @given(texts, small, texts, texts, texts, st.sampled_from(NODE_STATUSES), texts, st.none() | json_dicts, small,
           st.none() | floats, st.none() | floats, st.none() | floats)  # fmt: skip
    def check(commit: str, it: int, phase: str, kind: str, origin: str, status: str, reason: str,
              hyp: dict[str, Any] | None, lines: int, dev: float | None, std: float | None,
              test: float | None) -> None:  # fmt: skip
        node = store.add_node(run, commit, root, it, phase, kind, origin, status, reason, hyp, lines)
        assert store.get_node(node.id) == node
        assert (node.commit, node.parent_id, node.hypothesis, node.lines_changed) == (commit, root, hyp, lines)
        updated = store.update_node(node.id, dev_mean=dev, dev_std=std, test_mean=test)
        assert (updated.dev_mean, updated.dev_std, updated.test_mean) == (dev, std, test)
        assert store.get_node(node.id) == updated
        assert store.node_by_commit(commit, run) is not None

    check()


def test_edge_roundtrip(store: EvoDAG) -> None:
    run, root = _root(store)

    @SETTINGS
    @given(st.sampled_from(EDGE_KINDS), st.text(max_size=300), ids, small, small, ids, ids, ids, ids)
    def check(kind: str, diff: str, files: list[str], added: int, removed: int,
              fixed: list[str], regressed: list[str], failing: list[str], passing: list[str]) -> None:  # fmt: skip
        child = store.add_node(run, "c", root, 1, "capability", "capability", "patch").id
        edge = store.add_edge(run, root, child, kind, diff, files, added, removed)
        assert edge.diff_sha == diff_sha(diff)
        assert store.get_blob(edge.diff_sha) == diff
        assert store.get_edge(edge.id) == edge == store.edge_between(root, child) == store.edge_into(child)
        done = store.set_edge_transitions(edge.id, fixed, regressed, failing, passing)
        assert (done.fixed, done.regressed, done.still_failing, done.still_passing) == (
            fixed,
            regressed,
            failing,
            passing,
        )
        assert store.get_edge(edge.id) == done

    check()


def test_rollout_roundtrip(store: EvoDAG) -> None:
    run, root = _root(store)

    @SETTINGS
    @given(texts, st.sampled_from(SPLITS), ints, small, floats, st.booleans(), st.sampled_from(DISPOSITIONS),
           floats, small, floats, st.none() | texts, texts, texts, st.none() | texts, texts)  # fmt: skip
    def check(task: str, split: str, seed: int, rep: int, score: float, passed: bool, disp: str, cost: float,
              calls: int, dur: float, trace: str | None, err: str, rationale: str, ffile: str | None,
              group: str) -> None:  # fmt: skip
        fields = dict(run_id=run, node_id=root, task_id=task, split=split, seed=seed, repetition=rep, score=score,
                      passed=passed, disposition=disp, cost=cost, llm_calls=calls, duration_s=dur, trace_path=trace,
                      error_tail=err, rationale=rationale, failure_file=ffile, task_group=group)  # fmt: skip
        row = store.add_rollout(**fields)
        assert {k: getattr(row, k) for k in fields} == fields
        assert row in store.rollouts(node_id=root, split=split, task_id=task)

    check()


def test_lesson_and_session_roundtrip(store: EvoDAG) -> None:
    run, root = _root(store)

    @SETTINGS
    @given(st.sampled_from(LESSON_CATEGORIES), st.sampled_from(ATTRIBUTIONS), texts, st.none() | small,
           st.none() | texts, texts, small, small, floats, st.none() | texts)  # fmt: skip
    def check(cat: str, attr: str, text: str, it: int | None, task: str | None, model: str, turns: int, tok: int,
              cost: float, transcript: str | None) -> None:  # fmt: skip
        lesson = store.add_lesson(run, cat, attr, text, node_id=root, iteration=it, task_id=task)
        assert (lesson.category, lesson.attribution, lesson.text, lesson.iteration, lesson.task_id) == (
            cat, attr, text, it, task)  # fmt: skip
        assert lesson in store.lessons(run, node_id=root, category=cat, attribution=attr, task_id=task)
        sess = store.add_session(run, "reflection", "offline", iteration=it, node_id=root, model=model, turns=turns,
                                 tokens_in=tok, cost_usd=cost, transcript_path=transcript)  # fmt: skip
        assert (sess.model, sess.turns, sess.tokens_in, sess.cost_usd, sess.transcript_path) == (
            model, turns, tok, cost, transcript)  # fmt: skip
        assert sess in store.sessions(run, iteration=it)

    check()


def test_iteration_roundtrip(store: EvoDAG) -> None:
    run, root = _root(store)

    @SETTINGS
    @given(small, small, ids, texts, small, st.booleans(), st.sampled_from(["accepted", "rejected", "no_patch"]))
    def check(number: int, epoch: int, batch: list[str], phase: str, stall: int, explore: bool, decision: str) -> None:
        it = store.start_iteration(run, number, epoch, batch, parent_id=root, phase=phase, exploration=explore)
        assert (it.number, it.epoch, it.batch, it.parent_id, it.phase, it.exploration) == (
            number, epoch, batch, root, phase, explore)  # fmt: skip
        done = store.update_iteration(it.id, decision=decision, stall_count=stall, step="done", finished_at="t")
        assert store.current_iteration(run) == done
        assert (done.decision, done.stall_count, done.step, done.finished_at) == (decision, stall, "done", "t")

    check()


@SETTINGS
@given(st.text(min_size=1, max_size=30), json_dicts, json_dicts)
def test_cache_roundtrip(key: str, first: dict[str, Any], second: dict[str, Any]) -> None:
    # a fresh file per example: EvoDAG(":memory:") made a real file of that name in the current folder, shared by
    # every example and every later run
    with tempfile.TemporaryDirectory() as tmp, EvoDAG(Path(tmp) / "evodag.sqlite") as s:
        assert s.cache_get(key) is None
        s.cache_put(key, first)
        assert s.cache_get(key) == first
        s.cache_put(key, second)
        assert s.cache_get(key) == second


# behaviour -----------------------------------------------------------------------------------------
def test_add_rollout_idempotent_on_cache_key(store: EvoDAG) -> None:
    run, root = _root(store)
    base = dict(run_id=run, node_id=root, task_id="t", split="train", seed=1, repetition=0, disposition="success")
    first = store.add_rollout(**base, score=1.0, passed=True, cost=0.5, cache_key="k1")
    again = store.add_rollout(**base, score=0.0, passed=False, cost=9.0, cache_key="k1")
    assert again == first
    assert store.find_rollout("k1") == first
    store.add_rollout(**base, score=0.0, passed=False)
    store.add_rollout(**base, score=0.0, passed=False)
    assert store.count_rollouts(run) == 3
    assert store.rollout_cost(run) == pytest.approx(0.5)
    assert store.find_rollout("") is None
    assert store.add_rollouts([{**base, "score": 1.0, "passed": True, "cache_key": k} for k in ("k1", "k2", "k3")]) == 2
    assert store.count_rollouts() == 5 == len(store.rollouts(run_id=run))


def test_every_state_transition_is_an_event(store: EvoDAG) -> None:
    run, root = _root(store)
    child = store.add_node(run, "c", root, 1, "capability", "capability", "patch").id
    edge = store.add_edge(run, root, child, "patch", "d", ["f"], 1, 0).id
    store.set_edge_transitions(edge, ["t"], [], [], [])
    store.update_node(child, status="accepted", dev_mean=0.5)
    it = store.start_iteration(run, 1, 0, ["t"]).id
    store.update_iteration(it, step="done", decision="accepted")
    store.update_run(run, status="finished", best_node_id=child)
    kinds = [e.kind for e in store.events(run_id=run)]
    assert kinds == ["run.created", "node.added", "node.added", "edge.added", "edge.updated", "node.updated",
                     "iteration.started", "iteration.updated", "run.updated"]  # fmt: skip
    updates = [e.payload for e in store.events(run_id=run) if e.kind.endswith(".updated")]
    assert updates == [
        {"id": edge, "fixed": ["t"], "regressed": [], "still_failing": [], "still_passing": []},
        {"id": child, "status": "accepted", "dev_mean": 0.5},
        {"id": it, "step": "done", "decision": "accepted"},
        {"id": run, "status": "finished", "best_node_id": child},
    ]
    last = store.events()[-1].id
    assert store.events(since_id=last) == []
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.conn.execute("DELETE FROM events")


def test_events_of_one_kind_come_from_the_kind_index(store: EvoDAG) -> None:
    run, root = _root(store)
    other = store.create_run({}, seed=4).id
    first = store.log_event("loop.note", {"n": 1}, run_id=run)
    store.update_node(root, status="accepted")
    store.log_event("loop.note", {"n": 2}, run_id=other)
    store.log_event("loop.note", {"n": 3}, run_id=run)
    assert [e.payload["n"] for e in store.events(run_id=run, kind="loop.note")] == [1, 3]
    assert [e.payload["n"] for e in store.events(kind="loop.note")] == [1, 2, 3]
    assert [e.payload["n"] for e in store.events(since_id=first.id, run_id=run, kind="loop.note")] == [3]
    assert store.events(run_id=run, kind="no.such.kind") == []
    sql = "EXPLAIN QUERY PLAN SELECT id FROM events WHERE run_id = ? AND kind = ? AND id > ? ORDER BY id"
    plan = " ".join(str(row[-1]) for row in store.conn.execute(sql, (run, "loop.note", 0)))
    assert "events_kind" in plan


def test_transaction_groups_and_rolls_back(store: EvoDAG) -> None:
    run, root = _root(store)
    with pytest.raises(RuntimeError), store.transaction():
        store.add_node(run, "x", root, 1, "p", "k", "o")
        raise RuntimeError("boom")
    assert [n.commit for n in store.nodes(run)] == ["root"]
    with store.transaction():
        store.add_node(run, "kept", root, 1, "p", "k", "o")
        with pytest.raises(UnknownNodeError):
            store.add_node(run, "orphan", 999, 1, "p", "k", "o")
    assert [n.commit for n in store.nodes(run)] == ["root", "kept"]


def test_errors_say_what_to_do(store: EvoDAG) -> None:
    with pytest.raises(UnknownRunError, match="no run yet"):
        store.get_run()
    run, root = _root(store)
    with pytest.raises(UnknownNodeError, match=r"unknown node 42; `evo-dag summary` lists nodes"):
        store.get_node(42)
    with pytest.raises(UnknownEdgeError, match=r"unknown edge 1->2"):
        store.edge_between(1, 2)
    with pytest.raises(InvalidValueError, match="invalid node status 'great'"):
        store.update_node(root, status="great")
    with pytest.raises(InvalidValueError, match="no settable field"):
        store.update_node(root, score=1)
    with pytest.raises(InvalidValueError, match="invalid edge kind"):
        store.add_edge(run, root, root, "teleport", "", [], 0, 0)
    assert store.update_run(run, status="paused").status == "paused"
    with pytest.raises(InvalidValueError, match="invalid run status 'exploded'"):
        store.update_run(run, status="exploded")
    with pytest.raises(EvoDAGError, match="add_rollout needs"):
        store.add_rollout(run_id=run, node_id=root)


def test_fixture_is_deterministic(tmp_path: Path, fixture_dag: Callable[[Path], dict[str, int]]) -> None:
    def dump(path: Path) -> list[Any]:
        with EvoDAG(path, readonly=True) as s:
            return [asdict(x) for x in [*s.nodes(), *s.edges(), *s.rollouts(), *s.lessons(), *s.events()]]

    fixture_dag(tmp_path / "a.sqlite")
    fixture_dag(tmp_path / "b.sqlite")
    assert dump(tmp_path / "a.sqlite") == dump(tmp_path / "b.sqlite")


def test_memory_store_is_in_memory_and_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`EvoDAG(":memory:")` means what it means to SQLite: a private store that leaves no file behind."""
    monkeypatch.chdir(tmp_path)
    with EvoDAG(":memory:") as store:
        run = store.create_run({"name": "m"}, seed=0)
        store.add_node(run.id, "a" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline")
        assert [n.commit for n in store.nodes(run.id)] == ["a" * 40]
    with EvoDAG(":memory:") as fresh:
        assert fresh.nodes() == []
    assert list(tmp_path.iterdir()) == []


@SETTINGS
@given(st.lists(st.sampled_from(["k1", "k2", "k3", "", "absent"]), max_size=8), st.integers(0, 3))
def test_many_key_lookups_answer_as_the_one_key_lookups(keys: list[str], extra_rows: int) -> None:
    """`find_rollouts` / `cache_get_many` (one query per 500 keys, what an evaluation asks before running) give,
    for every key, what `find_rollout` / `cache_get` give; keys found nowhere are absent."""
    with tempfile.TemporaryDirectory() as tmp, EvoDAG(Path(tmp) / "evodag.sqlite") as s:
        run, root = _root(s)
        other = s.add_node(run, "b" * 40, root, 1, "capability", "capability", "o")
        base = dict(run_id=run, task_id="t", split="train", seed=1, repetition=0, disposition="success")
        for i, key in enumerate(["k1", "k2", "k1", "k2"][: 1 + extra_rows]):
            node = root if i % 2 == 0 else other.id
            s.add_rollout(**base, node_id=node, score=i / 4, passed=bool(i % 2), cache_key=key)
        s.cache_put("k3", {"score": 0.5})
        s.cache_put("", {"score": 0.25})
        many = s.find_rollouts(keys)
        assert many == {k: row for k in keys if (row := s.find_rollout(k)) is not None}
        payloads = s.cache_get_many(keys)
        assert payloads == {k: p for k in keys if (p := s.cache_get(k)) is not None}
    with tempfile.TemporaryDirectory() as tmp, EvoDAG(Path(tmp) / "evodag.sqlite") as s:
        keys = [f"key-{i}" for i in range(1200)]  # beyond SQLite's bound-parameter limit in one query
        for key in keys[::100]:
            s.cache_put(key, {"k": key})
        assert sorted(s.cache_get_many(keys)) == sorted(keys[::100])


def test_many_key_lookups_use_the_cache_key_index(store: EvoDAG) -> None:
    """A batch's lookup must not scan every rollout of a long run: its query searches the partial index."""
    asked: list[str] = []
    store.conn.set_trace_callback(asked.append)
    try:
        store.find_rollouts(["k1", "k2"])
    finally:
        store.conn.set_trace_callback(None)
    select = next(sql for sql in asked if sql.lstrip().upper().startswith("SELECT"))
    plan = " ".join(str(row[-1]) for row in store.conn.execute(f"EXPLAIN QUERY PLAN {select}"))
    assert "USING INDEX rollouts_cache" in plan or "USING COVERING INDEX rollouts_cache" in plan, plan

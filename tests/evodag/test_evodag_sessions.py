"""Sessions keyed by (run, iteration, role, attempt): paid for once, answer and change stored for replay (schema V3)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evodag.errors import EvoDAGError
from evodag.schema import MIGRATIONS, migrate
from evodag.store import EvoDAG


@pytest.fixture
def store(tmp_path: Path, counting_clock: Callable[..., Callable[[], str]]) -> Any:
    with EvoDAG(tmp_path / "evodag.sqlite", clock=counting_clock()) as s:
        yield s


def test_a_keyed_session_is_stored_once_and_counted_once(store: EvoDAG) -> None:
    run = store.create_run({}, 0).id
    first = store.add_session(
        run, "reflection", "command", iteration=3, attempt=0, cost_usd=0.25, result={"lessons": [], "summary": "s"}
    )
    again = store.add_session(run, "reflection", "command", iteration=3, attempt=0, cost_usd=0.25, result={})
    assert again == first and again.result == {"lessons": [], "summary": "s"}
    store.add_session(run, "reflection", "command", iteration=3, attempt=1, cost_usd=0.5)
    assert (store.count_sessions(run), store.session_cost(run)) == (2, 0.75)
    assert store.session_at(run, 3, "reflection", 1) is not None
    assert store.session_at(run, 3, "reflection", 2) is None
    assert store.session_at(run, 3, "evolution", 0) is None
    with pytest.raises(sqlite3.IntegrityError):
        store.conn.execute(
            "INSERT INTO sessions (run_id, iteration, role, backend, attempt, created_at) "
            "VALUES (?, 3, 'reflection', 'x', 0, 't')",
            (run,),
        )


def test_unkeyed_sessions_are_not_deduplicated(store: EvoDAG) -> None:
    run = store.create_run({}, 0).id
    store.add_session(run, "diagnosis_patch", "skill", iteration=1)
    store.add_session(run, "diagnosis_patch", "skill", iteration=1)
    assert store.count_sessions(run) == 2


def test_a_keyed_session_needs_its_iteration(store: EvoDAG) -> None:
    run = store.create_run({}, 0).id
    with pytest.raises(EvoDAGError, match="needs its iteration"):
        store.add_session(run, "evolution", "offline", attempt=0)


@settings(max_examples=40, deadline=None)
@given(change=st.binary(max_size=300))
def test_a_diagnosis_change_round_trips_byte_for_byte(tmp_path_factory: pytest.TempPathFactory, change: bytes) -> None:
    with EvoDAG(tmp_path_factory.mktemp("s") / "evodag.sqlite") as store:
        run = store.create_run({}, 0).id
        row = store.add_session(run, "diagnosis_patch", "command", iteration=1, attempt=0, change=change)
        assert row.change_sha is not None
        assert store.get_blob_bytes(row.change_sha) == change


def test_text_and_bytes_blobs_with_the_same_content_share_one_row(store: EvoDAG) -> None:
    run = store.create_run({}, 0).id
    root = store.add_node(run, "a", None, 0, "baseline", "baseline", "baseline", status="baseline").id
    child = store.add_node(run, "b", root, 1, "capability", "capability", "p").id
    diff = "diff --git a/x b/x\n+é\n"
    edge = store.add_edge(run, root, child, "patch", diff, ["x"], 1, 0)
    sha = store.put_blob(diff.encode("utf-8"))
    assert sha == edge.diff_sha
    assert store.get_blob(sha) == diff and store.get_blob_bytes(sha) == diff.encode("utf-8")


def test_a_v2_file_migrates_keeping_its_sessions_unkeyed(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:2])
    conn.execute("INSERT INTO runs (config, seed, started_at) VALUES ('{}', 1, 't')")
    for _ in range(2):  # the duplicate rows an old resume left behind
        conn.execute(
            "INSERT INTO sessions (run_id, iteration, role, backend, cost_usd, created_at) "
            "VALUES (1, 2, 'reflection', 'command', 0.5, 't')"
        )
    conn.close()
    with EvoDAG(path) as store:
        rows = store.sessions()
        assert [(r.attempt, r.result, r.change_sha) for r in rows] == [(None, None, None)] * 2
        assert store.get_run().inputs is None
        store.add_session(1, "reflection", "command", iteration=2, attempt=0)
        assert store.count_sessions(1) == 3

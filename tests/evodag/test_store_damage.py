"""A damaged EvoDAG file is refused on open, before anything is written, with one line naming what is wrong
(issue 12, item 2): empty file, random bytes, damaged pages, a foreign SQLite file, bad JSON and wrong types in
a column (named by table, row and column). Through the store, `evo-dag` and `saddler run`."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_output import said
from typer.testing import CliRunner

from evodag.cli import app as evodag_app
from evodag.errors import DamagedDatabaseError, EvoDAGError, InvalidValueError
from evodag.store import EvoDAG
from saddler.cli.app import app as saddler_app
from saddler.run.folder import init_run

runner = CliRunner()


def _digest(path: Path) -> str:
    """Hash of the database file and its WAL (the bytes a write would change)."""
    h = hashlib.sha256()
    for p in (path, path.with_name(path.name + "-wal")):
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()


@pytest.fixture
def store_file(tmp_path: Path, fixture_dag: Callable[[Path], dict[str, int]]) -> Path:
    """The fixture DAG in tmp_path/evodag.sqlite, to be damaged."""
    path = tmp_path / "evodag.sqlite"
    fixture_dag(path)
    return path


def _poke(path: Path, sql: str) -> None:
    """Damage one value behind the store's back, the way a hand edit or a bad tool would."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(sql)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_an_empty_file_is_refused_not_turned_into_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    path.touch()
    with pytest.raises(DamagedDatabaseError, match=r"is empty \(0 bytes\)") as exc:
        EvoDAG(path)
    assert exc.value.exit_code == 1 and "\n" not in str(exc.value)
    assert path.stat().st_size == 0 and not path.with_name("evodag.sqlite-wal").exists()
    with pytest.raises(DamagedDatabaseError):
        EvoDAG(path, readonly=True)


def test_a_new_store_is_created_whole(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "evodag.sqlite"
    with EvoDAG(path) as store:
        store.create_run({}, 0)
    assert sorted(p.name for p in path.parent.iterdir()) == ["evodag.sqlite"]  # no temporary file left


@pytest.mark.parametrize("size", [512, 8192])
def test_random_bytes_are_refused_and_left_untouched(tmp_path: Path, size: int) -> None:
    path = tmp_path / "evodag.sqlite"
    path.write_bytes(random.Random(size).randbytes(size))
    before = _digest(path)
    with pytest.raises(DamagedDatabaseError, match="is not an EvoDAG database file"):
        EvoDAG(path)
    assert _digest(path) == before


def test_damaged_pages_fail_the_quick_check(store_file: Path) -> None:
    path = store_file
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    rng = random.Random(3)
    for offset in range(2 * page, len(data), page):  # scribble over every page but the first (the header)
        data[offset : offset + 64] = rng.randbytes(64)
    path.write_bytes(bytes(data))
    before = _digest(path)
    with pytest.raises(DamagedDatabaseError, match="failed its integrity check") as exc:
        EvoDAG(path)
    assert "restore it from a backup" in str(exc.value) and "\n" not in str(exc.value)
    assert _digest(path) == before


def test_a_foreign_sqlite_file_is_not_adopted(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    before = _digest(path)
    with pytest.raises(EvoDAGError, match="not an EvoDAG database"):
        EvoDAG(path)
    assert _digest(path) == before


def test_a_missing_table_is_named(store_file: Path) -> None:
    path = store_file
    _poke(path, "DROP TABLE lessons")
    with pytest.raises(DamagedDatabaseError, match="table lessons is missing"):
        EvoDAG(path)
    with pytest.raises(DamagedDatabaseError, match="table lessons is missing"):
        EvoDAG(path, readonly=True)


BAD_VALUES = [  # (damage, what the refusal says, an evo-dag command that reads that value)
    ("UPDATE runs SET config = '{not json' WHERE id = 1", "runs row 1, column config: invalid JSON", ["summary"]),
    ("UPDATE iterations SET batch = '[\"t-a\",' WHERE id = 5", "iterations row 5, column batch: invalid JSON",
     ["batch"]),
    ("UPDATE nodes SET hypothesis = 'oops' WHERE id = 2", "nodes row 2, column hypothesis: invalid JSON",
     ["node", "2"]),
    ("UPDATE nodes SET hypothesis = '[1, 2]' WHERE id = 2",
     "nodes row 2, column hypothesis: expected a JSON object", ["export"]),
    ("UPDATE rollouts SET score = 'high' WHERE id = 3", "rollouts row 3, column score: expected a number, found text",
     ["scenario", "t-c"]),
    ("UPDATE nodes SET dev_mean = 'x' WHERE id = 4", "nodes row 4, column dev_mean: expected a number, found text",
     ["node", "4"]),
    ("UPDATE edges SET lines_added = 2.5 WHERE id = 1", "edges row 1, column lines_added: expected an integer",
     ["export"]),
    ("UPDATE events SET payload = '{' WHERE id = 5", "events row 5, column payload: invalid JSON", None),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "message", "command"), BAD_VALUES, ids=[m.split(",")[0] for _, m, _ in BAD_VALUES])
def test_a_bad_value_is_named_by_table_row_and_column_before_any_write(
    tmp_path: Path, store_file: Path, sql: str, message: str, command: list[str] | None
) -> None:
    path = store_file
    if sql.startswith("UPDATE events"):  # events are append-only: drop the guard to damage one
        _poke(path, "DROP TRIGGER events_no_update")
    _poke(path, sql)
    before = _digest(path)
    with pytest.raises(DamagedDatabaseError) as exc:
        EvoDAG(path)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert _digest(path) == before
    if command is not None:  # a reader decodes what it reads: one line, exit 1, no traceback
        result = runner.invoke(evodag_app, [*command, "--db", str(path)])
        assert (result.exit_code, result.stdout) == (1, ""), result.output
        assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_the_store_refuses_to_write_a_wrong_type(tmp_path: Path) -> None:
    with EvoDAG(tmp_path / "evodag.sqlite") as store:
        run = store.create_run({}, 0).id
        node = store.add_node(run, "c" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline").id
        with pytest.raises(InvalidValueError, match=r"rollouts\.score: expected a number, got str"):
            store.add_rollout(
                run_id=run, node_id=node, task_id="t", split="train", seed=1, repetition=0, score="high",
                passed=False, disposition="task_failure",
            )  # fmt: skip
        with pytest.raises(InvalidValueError, match=r"nodes\.dev_mean: expected a number, got str"):
            store.update_node(node, dev_mean="0.5")
        assert store.count_rollouts(run) == 0 and store.get_node(node).dev_mean is None


@pytest.mark.slow
def test_saddler_run_refuses_a_damaged_store_before_running_anything(tmp_path: Path) -> None:
    run = tmp_path / "run"
    init_run(run, template="opsdesk", overrides={"loop": {"max_iterations": 0, "test_runs": 1}})
    (run / "evodag.sqlite").touch()
    result = runner.invoke(saddler_app, ["run", str(run), "--quiet"])
    assert result.exit_code == 1, result.output
    assert len(said(result.output)) == 1 and "is empty (0 bytes)" in result.output
    assert (run / "evodag.sqlite").stat().st_size == 0
    assert not (run / "traces").exists() or not any((run / "traces").iterdir())

    (run / "evodag.sqlite").unlink()
    assert runner.invoke(saddler_app, ["run", str(run), "--quiet"]).exit_code == 0
    _poke(run / "evodag.sqlite", "UPDATE runs SET config = 'garbage' WHERE id = 1")
    before = _digest(run / "evodag.sqlite")
    result = runner.invoke(saddler_app, ["run", str(run), "--quiet"])
    assert result.exit_code == 1
    assert len(said(result.output)) == 1 and "runs row 1, column config: invalid JSON" in result.output
    assert _digest(run / "evodag.sqlite") == before
    status = runner.invoke(saddler_app, ["status", str(run)])
    assert status.exit_code == 1 and "runs row 1, column config" in status.output


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small finished opsdesk run (2 iterations), to copy and damage."""
    run = tmp_path_factory.mktemp("damage") / "run"
    init_run(run, template="opsdesk", overrides={"loop": {"max_iterations": 2, "test_runs": 1}})
    assert runner.invoke(saddler_app, ["run", str(run), "--quiet"]).exit_code == 0
    return run


READER_DAMAGE = [  # (damage, what every reader's one line names); none of the readers below reads all of these
    ("UPDATE iterations SET batch = '[\"t\",' WHERE id = 1", "iterations row 1, column batch: invalid JSON"),
    ("UPDATE edges SET fixed = '{\"a\": 1}' WHERE id = 1", "edges row 1, column fixed: expected a JSON array"),
    ("UPDATE nodes SET hypothesis = 'oops' WHERE id = 2", "nodes row 2, column hypothesis: invalid JSON"),
    ("UPDATE rollouts SET score = 'high' WHERE id = 3", "rollouts row 3, column score: expected a number, found text"),
]
READERS = [
    (evodag_app, ["summary", "--run"]),
    (evodag_app, ["best", "--run"]),
    (saddler_app, ["status"]),
    (saddler_app, ["status", "--json"]),
    (saddler_app, ["report"]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("sql", "message"), READER_DAMAGE, ids=[m.split(":")[0] for _, m in READER_DAMAGE])
def test_every_reader_refuses_a_damaged_value_in_one_line_before_writing(
    tmp_path: Path, finished_run: Path, sql: str, message: str
) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run, symlinks=True)
    _poke(run / "evodag.sqlite", sql)
    written = {p.name: _digest(p) for p in (run / "report.md", run / "results.tsv", run / "progress.png")}
    for app, args in READERS:
        result = runner.invoke(app, [*args, str(run)])
        assert result.exit_code == 1, (args, result.output)
        assert result.output.count("\n") == 1 and message in result.output, (args, result.output)
    assert {p.name: _digest(p) for p in (run / "report.md", run / "results.tsv", run / "progress.png")} == written


STORED = [  # (table, column, a value as SQL): every kind of column, values the decoder accepts and refuses
    *[("edges", "lines_added", v) for v in ("7", "2.5", "'5a'", "'x'", "X'00'", "-0", "9223372036854775807")],
    *[("rollouts", "score", v) for v in ("0.5", "1", "'high'", "'1e5'", "X'01'", "1e999", "-1e999")],
    *[("nodes", "phase", v) for v in ("'steering'", "5", "X'41'", "''")],
    *[("rollouts", "passed", v) for v in ("0", "1", "2", "1.0", "'yes'", "-1")],
    *[
        ("nodes", "hypothesis", v)
        for v in (
            "NULL",
            "'{\"a\": 1}'",
            "'[1]'",
            "'oops'",
            "'{\"a\": NaN}'",
            "'{\"a\": 1,}'",
            "'{\"a\": \"' || char(1) || '\"}'",
            "X'7b7d'",
            "'  {} '",
            "'{\"a\": Infinity}'",
            "'{a: 1}'",
            "'5'",
        )
    ],
    *[("edges", "fixed", v) for v in ("'[]'", "'{}'", "'[1,]'", "'[\"t\"]'", "'[1] x'", "''")],
    *[("nodes", "dev_mean", v) for v in ("NULL", "0.25", "'0.25x'")],
    *[("events", "payload", v) for v in ("'{}'", "'{\"k\": [1, 2]}'", "'[]'", "'{'")],
]


@pytest.mark.parametrize(("table", "column", "value"), STORED, ids=[f"{t}.{c}={v}" for t, c, v in STORED])
def test_the_readers_sql_check_refuses_exactly_what_the_decoder_refuses(
    store_file: Path, table: str, column: str, value: str
) -> None:
    from evodag import integrity
    from evodag.errors import CorruptRowError

    if table == "events":
        _poke(store_file, "DROP TRIGGER events_no_update")
    _poke(store_file, f"UPDATE {table} SET {column} = {value} WHERE id = 2")
    conn = sqlite3.connect(store_file)

    def outcome(check: Callable[[sqlite3.Connection, Path], None]) -> tuple[object, ...] | None:
        try:
            check(conn, store_file)
        except CorruptRowError as exc:
            return (exc.table, exc.row_id, exc.column)
        return None

    assert outcome(integrity.check_values) == outcome(integrity.check_rows)

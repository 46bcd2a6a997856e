"""`evo-dag query SQL`: ad-hoc read-only SQL over a run's EvoDAG (rows as sqlite-utils gives them), refused the
moment a statement would write, attach a file or change a setting."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evodag.cli import app

runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path, fixture_dag: Callable[[Path], dict[str, int]]) -> Path:
    path = tmp_path / "evodag.sqlite"
    fixture_dag(path)
    return path


def test_a_select_prints_its_rows_as_json(db: Path) -> None:
    sql = "SELECT id, status FROM nodes WHERE id <= :n ORDER BY id"
    result = runner.invoke(app, ["query", sql, "--param", "n=2", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "columns": ["id", "status"],
        "rows": [{"id": 1, "status": "baseline"}, {"id": 2, "status": "accepted"}],
        "truncated": False,
    }


def test_text_output_is_tab_separated_with_a_header(db: Path) -> None:
    result = runner.invoke(app, ["query", "SELECT id, status FROM nodes ORDER BY id LIMIT 2", "--db", str(db)])
    assert (result.exit_code, result.stdout) == (0, "id\tstatus\n1\tbaseline\n2\taccepted\n")


def test_rows_past_the_limit_are_cut_and_said(db: Path) -> None:
    result = runner.invoke(app, ["query", "SELECT id FROM nodes ORDER BY id", "--max-rows", "2", "--db", str(db),
                                 "--json"])  # fmt: skip
    doc = json.loads(result.stdout)
    assert (doc["rows"], doc["truncated"]) == ([{"id": 1}, {"id": 2}], True)


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM nodes",
        "UPDATE nodes SET status = 'x'",
        "ATTACH DATABASE 'planted.db' AS p",
        "PRAGMA journal_mode = DELETE",
        "CREATE TEMP TABLE t(x)",
    ],
)
def test_anything_but_a_read_is_refused_in_one_line(db: Path, sql: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    before = db.read_bytes()
    result = runner.invoke(app, ["query", sql, "--db", str(db)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("evo-dag: query refused: ") and result.stderr.count("\n") == 1
    assert db.read_bytes() == before and not (tmp_path / "planted.db").exists()


def test_bad_sql_and_bad_params_are_one_line(db: Path) -> None:
    bad = runner.invoke(app, ["query", "SELECT nope FROM nodes", "--db", str(db)])
    assert (bad.exit_code, bad.stderr) == (2, "evo-dag: query failed: no such column: nope\n")
    param = runner.invoke(app, ["query", "SELECT :n", "--param", "n", "--db", str(db)])
    assert (param.exit_code, param.stderr) == (2, "evo-dag: --param takes NAME=VALUE, got 'n'\n")

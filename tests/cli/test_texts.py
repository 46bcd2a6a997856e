"""The text a person reads (issue 23 item 8): help that keeps its brackets, no `#None`, an edge by the id every
output names, file-or-folder said plainly."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evodag.cli import app as evodag_app
from saddler.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["init"], "override a [run] key"),
        (["fork"], "change a [run] key in the fork"),
        (["validate"], "its saddler.toml [run]"),
        (["doctor"], "if it has [run]"),
    ],
)
def test_help_keeps_the_brackets_it_quotes_and_shows_no_metavar_on_a_flag(command: list[str], says: str) -> None:
    result = runner.invoke(app, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert says in result.output
    assert "<bool>" not in result.output


def test_an_iteration_without_a_candidate_says_so_not_none(tmp_path: Path, open_store: Callable[[Any], Any]) -> None:
    store, _ = open_store(tmp_path / "evodag.sqlite")
    run = store.create_run({"name": "r"}, seed=1)
    base = store.add_node(run.id, "a" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline")
    store.start_iteration(run.id, 1, 0, ["t1"], phase="capability", parent_id=base.id)
    store.close()
    result = runner.invoke(evodag_app, ["summary", "--db", str(tmp_path / "evodag.sqlite")])
    assert result.exit_code == 0, result.output
    assert "#None" not in result.output
    assert f"parent #{base.id}, candidate -," in result.output


def test_an_edge_is_shown_by_the_id_every_output_names(
    tmp_path: Path, build_run: Callable[..., Any], open_store: Callable[[Any], Any]
) -> None:
    store, clock = open_store(tmp_path / "evodag.sqlite")
    fx = build_run(store, clock)
    edge = store.edge_between(fx.ids["N1"], fx.ids["N2"])
    store.close()
    db = ["--db", str(tmp_path / "evodag.sqlite"), "--json"]
    by_id = runner.invoke(evodag_app, ["edge", str(edge.id), *db])
    by_ends = runner.invoke(evodag_app, ["edge", str(fx.ids["N1"]), str(fx.ids["N2"]), *db])
    assert by_id.exit_code == by_ends.exit_code == 0, by_id.output
    assert json.loads(by_id.output) == json.loads(by_ends.output)
    assert json.loads(by_id.output)["edge"]["id"] == edge.id
    missing = runner.invoke(evodag_app, ["edge", "999", "--db", str(tmp_path / "evodag.sqlite")])
    assert missing.exit_code != 0 and "999" in missing.output


def test_a_harness_that_is_a_file_is_called_a_file(tmp_path: Path) -> None:
    harness = tmp_path / "agent.py"
    harness.write_text("x = 1\n", encoding="utf-8")
    result = runner.invoke(app, ["init", str(tmp_path / "run"), "--harness", str(harness), "-b", "opsdesk"])
    assert result.exit_code == 2
    assert f"--harness {harness}: is a file, not a folder" in result.output
    check = runner.invoke(app, ["validate", str(harness)])
    assert check.exit_code == 2 and f"{harness}: is a file, not a folder" in check.output

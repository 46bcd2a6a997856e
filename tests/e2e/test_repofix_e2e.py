"""End to end: `saddler init --template repofix` then `saddler run` with the offline backend, through the real CLI."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.repofix import RepofixBenchmark
from evodag.store import EvoDAG
from saddler.cli.app import app

pytestmark = pytest.mark.slow
runner = CliRunner()


def test_init_and_run_the_repofix_template(tmp_path: Path) -> None:
    run = tmp_path / "run"
    sets = ["loop.max_iterations=6", "loop.test_runs=1", "policies.capability_epochs=0.5"]
    init = runner.invoke(app, ["init", str(run), "--template", "repofix", *(x for s in sets for x in ("--set", s))])
    assert init.exit_code == 0, init.output
    cfg = tomllib.loads((run / "saddler.toml").read_text())["run"]
    assert (cfg["benchmark"], cfg["sessions"]["backend"], cfg["loop"]["batch_size"]) == ("repofix", "offline", 6)
    assert runner.invoke(app, ["validate", str(run)]).output == "ok\n"
    result = runner.invoke(app, ["run", str(run), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["termination"] == "max_iterations" and summary["rollouts"] > 0
    bank = {p["id"]: p for p in RepofixBenchmark().bank_metadata()["patches"]}
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert len(store.iterations()) == 6 and store.get_run().status == "finished"
        tried = [n.origin.removeprefix("bank:") for n in store.nodes() if n.origin.startswith("bank:")]
        patched_in = {it.phase for it in store.iterations() if it.candidate_id is not None}
    assert tried and set(tried) <= set(bank)  # the offline diagnosis read repofix symptoms and patched from its bank
    assert "capability" in patched_in and patched_in & {"steering", "mixed"}  # both phases of work found patches
    for name in ("report.md", "results.tsv", "best/EXPORT.json"):
        assert (run / name).is_file(), name

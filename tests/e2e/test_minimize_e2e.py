"""End to end through the real CLI on both bundled offline benchmarks: an opsdesk run minimizes its best at the
end (the summary line, report.md's section, status, best/), and `saddler minimize` on a run that did not returns
the same record as a run that did, paying for nothing twice once it is recorded; on repofix, `saddler minimize --node`
minimizes an accepted node that is not the run's best and leaves the run's answer as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.minimized import ORIGIN, minimization

pytestmark = pytest.mark.slow
runner = CliRunner()
SETS = ["loop.max_iterations=5", "loop.test_runs=1", "policies.capability_epochs=0.5"]


def _init(run: Path, template: str, *extra: str) -> None:
    sets = [*SETS, *extra]
    result = runner.invoke(app, ["init", str(run), "--template", template, *(x for s in sets for x in ("--set", s))])
    assert result.exit_code == 0, result.output


def test_a_run_minimizes_its_best_and_saddler_minimize_does_the_same_later(tmp_path: Path) -> None:
    run, later, template = tmp_path / "run", tmp_path / "later", "opsdesk"
    _init(run, template)
    result = runner.invoke(app, ["run", str(run)])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("minimized: "))
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        best = store.get_run().best_node_id
        found = minimization(store, store.get_run().id, best)
        assert found is not None and found.best_node == best and found.stopped == "done"
        made = [n for n in store.nodes() if n.origin == ORIGIN]
        mine = {n.id for n in made}
        spent = sum(1 for r in store.rollouts(split="dev") if r.node_id in mine)
        assert found.rollouts == spent and all(store.edge_into(n.id) is not None for n in made)
        assert len(made) >= 1 and {c.change for c in found.contributions} == set(range(1, found.changes + 1))
        rollouts = store.count_rollouts()
    assert line.startswith(f"minimized: {found.summary()}") and line.endswith(f"node {found.node}")
    assert "## Minimized" in (run / "report.md").read_text()
    assert json.loads((run / "best" / "EXPORT.json").read_text())["node_id"] == found.node
    status = json.loads(runner.invoke(app, ["status", str(run), "--json"]).stdout)
    assert status["minimized"]["summary"] == found.summary()
    again = runner.invoke(app, ["minimize", str(run), "--json"])  # recorded: returned as it is, nothing runs
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == found.to_json()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert store.count_rollouts() == rollouts

    # the same run without minimization at its end, minimized afterwards: the same record and answer
    _init(later, template, "minimize.enabled=false")
    first = runner.invoke(app, ["run", str(later)])
    assert first.exit_code == 0 and "minimized:" not in first.stdout
    cut = runner.invoke(app, ["minimize", str(later)])
    assert cut.exit_code == 0, cut.output
    assert f"minimized: {found.summary()}, node {found.node}" in cut.stdout
    assert json.loads((later / "best" / "EXPORT.json").read_text())["node_id"] == found.node
    assert "## Minimized" in (later / "report.md").read_text()
    rerun = runner.invoke(app, ["run", str(later)])  # finished: the stored outcome, the minimized line included
    assert rerun.exit_code == 0 and line in rerun.stdout.splitlines()


def test_saddler_minimize_node_on_repofix(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _init(run, "repofix", "seed=3", "loop.max_iterations=8", "policies.phases='none'", "minimize.enabled=false")
    first = runner.invoke(app, ["run", str(run)])
    assert first.exit_code == 0 and "minimized:" not in first.stdout, first.output
    exported = (run / "best" / "EXPORT.json").read_text()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        best = store.get_run().best_node_id
        others = [n for n in store.nodes() if n.status == "accepted" and n.id != best]
    assert others, "8 iterations of seed 3 accept a repofix patch that a later one outscores on dev"
    node = others[-1]
    cut = runner.invoke(app, ["minimize", str(run), "--node", str(node.id), "--json"])
    assert cut.exit_code == 0, cut.output
    record = json.loads(cut.stdout)
    assert record["best_node"] == node.id and record["stopped"] == "done" and record["changes"] >= 1
    assert {c["change"] for c in record["contributions"]} == set(range(1, record["changes"] + 1))
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        made = [n for n in store.nodes() if n.origin == ORIGIN]
        assert made and all(n.dev_mean is not None and store.edge_into(n.id) is not None for n in made)
        assert store.get_run().best_node_id == best  # minimizing another node does not change the run's answer
        rollouts = store.count_rollouts()
    assert (run / "best" / "EXPORT.json").read_text() == exported
    again = runner.invoke(app, ["minimize", str(run), "--node", str(node.id), "--json"])
    assert json.loads(again.stdout) == record
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert store.count_rollouts() == rollouts

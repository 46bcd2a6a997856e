"""End to end with several iterations in flight: the same seed gives the same DAG (the offline backend is ordered on
the assumed latencies), a stop ends the iterations in flight and then the run, the simulated clock stamps the store
in virtual time, and the command backend runs sessions of different iterations at once on threads."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from repo_paths import FAKE_AGENT
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.run.loop import Optimizer
from saddler.schedule import EPOCH_S, Schedule
from saddler.schedule.latency import ASSUMED

pytestmark = pytest.mark.slow
FLYING = {"parallel_iterations": 3, "max_iterations": 6}


def _overlapped(run_dir: Path) -> list[int]:
    """Iterations that started before the one before them finished (several were in flight)."""
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        return [it.number for it in store.iterations() if (it.started_after or 0) < it.number - 1]


def test_the_same_seed_gives_the_same_dag_with_iterations_in_flight(
    tmp_path: Path, make_run: Callable[..., Path], dag_signature: Callable[[Path], dict[str, Any]]
) -> None:
    first, second = (make_run(tmp_path / name, loop=FLYING) for name in ("a", "b"))
    for run_dir in (first, second):
        assert Optimizer(run_dir, quiet=True).run().reason == "max_iterations"
    assert dag_signature(first) == dag_signature(second)
    assert _overlapped(first), "no two iterations were in flight at once"
    with EvoDAG(first / "evodag.sqlite", readonly=True) as store:
        orders = sorted(it.finish_order for it in store.iterations())
        carried = [(it.evidence or {}).get("carried") for it in store.iterations()]
        nodes = {n.id: n for n in store.nodes()}
    assert orders == list(range(1, 7))
    moved = [c for c in carried if c and c["node"] is not None]
    assert moved, "no kept change was carried onto the line"
    for c in moved:  # a cherry-pick onto the node the line had reached, holding the candidate's hypothesis
        node = nodes[c["node"]]
        assert (node.parent_id, node.patch_kind, node.hypothesis["carried"]["onto"]) == (
            c["onto"],
            "cherry_pick",
            c["onto"],
        )


def test_a_simulated_run_stamps_its_store_in_virtual_time(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run_dir = make_run(tmp_path / "sim", loop=FLYING)
    Optimizer(run_dir, quiet=True, schedule=Schedule.simulation(ASSUMED)).run()
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        started = datetime.fromisoformat(store.get_run().started_at).timestamp()
        ended = max(datetime.fromisoformat(e.ts).timestamp() for e in store.events())
        searched = [e for e in store.events() if e.kind == "schedule.search_ended"]
    assert started == EPOCH_S and ended - started > 3600  # hours of virtual time, in seconds of real time
    assert len(searched) == 1 and searched[0].payload["busy_seconds"] > 0


def test_a_stop_while_iterations_fly_lets_them_end_then_finishes(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run_dir = make_run(tmp_path / "stop", loop={**FLYING, "max_iterations": 12})

    def stop_at_the_second(text: str) -> None:
        if text.startswith("iter   2 ["):
            (run_dir / "STOP").touch()

    outcome = Optimizer(run_dir, quiet=True, say=stop_at_the_second).run()
    assert outcome.reason == "stop_requested" and outcome.best_test is not None
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        iterations = store.iterations()
        assert store.get_run().status == "finished"
    assert all(it.finished_at is not None for it in iterations)  # those in flight ran to their end
    assert 2 <= len(iterations) < 12


def test_the_command_backend_runs_sessions_of_iterations_in_flight(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = f"{sys.executable} {FAKE_AGENT} {{prompt_file}}"
    sets = {
        "sessions.command": json.dumps(command), "loop.max_iterations": "4", "loop.parallel_iterations": "2",
        "loop.batch_size": "3", "loop.test_runs": "1", "executor.workers": "2",
    }  # fmt: skip
    args = ["init", str(run_dir), "--template", "opsdesk", "--backend", "command", "--seed", "1"]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    runner = CliRunner()
    assert (init := runner.invoke(app, args)).exit_code == 0, init.output
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(run_dir / "evodag.sqlite") as db:
        outcomes = db.execute("select outcome from sessions").fetchall()
        escaped = db.execute("select count(*) from events where kind = 'session.escaped'").fetchone()[0]
        twice = db.execute(
            "select iteration, role, attempt from sessions group by 1, 2, 3 having count(*) > 1"
        ).fetchall()
    assert outcomes and escaped == 0 and twice == []  # saddler's own writes beside a session are not its escapes
    assert _overlapped(run_dir), "no two iterations were in flight at once"

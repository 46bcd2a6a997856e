"""status_snapshot / render_status on a real store opened read-only beside its writer."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evodag.store import EvoDAG
from saddler.reporting.status import render_status, status_snapshot
from saddler.runlock import run_lock


def test_finished_run_snapshot_and_text(
    tmp_path: Path, build_run: Callable[..., Any], open_store: Callable[[Any], Any]
) -> None:
    writer, clock = open_store(tmp_path / "evodag.db")
    fx = build_run(writer, clock)
    (tmp_path / "PAUSE").touch()  # a finished run stays finished whatever the sentinels say
    with EvoDAG(tmp_path / "evodag.db", readonly=True) as reader:
        snap = status_snapshot(reader, tmp_path)
    assert snap == {
        "run_id": fx.run_id, "name": "fixture-run", "benchmark": "opsdesk", "state": "finished",
        "running": False, "pid": None,
        "termination_reason": "max_iterations", "iteration": 8, "max_iterations": 8, "step": "done",
        "phase": "steering", "epoch": 2, "batch": ["tr-3", "tr-6", "tr-8"], "exploration": False, "stall_count": 0,
        "stall_limit": 4,
        "last_decisions": [{"iteration": 4, "decision": "accepted"}, {"iteration": 5, "decision": "accepted"},
                           {"iteration": 6, "decision": "rejected"}, {"iteration": 7, "decision": "no_patch"},
                           {"iteration": 8, "decision": "neutral"}],
        "best_node": fx.ids["N7"], "best_commit": fx.fake_commit("N7")[:7], "best_dev": 1.0, "baseline_dev": 0.5,
        "rollouts": 85, "rollouts_by_split": {"train": 37, "dev": 24, "test": 24}, "infra_errors": 0, "metric": None,
        "waiting_until": None, "minimized": None,
        "cost_usd": {"optimizer": 0.59, "rollouts": 0.85, "total": 1.44}, "schedule": None,
    }  # fmt: skip
    assert render_status(snap) == "\n".join(
        [
            f"run {fx.run_id} fixture-run (opsdesk): finished — max_iterations",
            "iteration 8/8 · epoch 2 · phase steering · step done · batch tr-3, tr-6, tr-8",
            "last decisions: 4 accepted, 5 accepted, 6 rejected, 7 no_patch, 8 neutral",
            f"best: node {fx.ids['N7']} ({fx.fake_commit('N7')[:7]}) dev 1.0000 (baseline 0.5000)",
            "stall 0/4 · exploration off",
            "rollouts 85 (train 37, dev 24, test 24) · cost $1.4400 (optimizer $0.5900, rollouts $0.8500)",
        ]
    )
    writer.close()


@pytest.fixture()
def running(
    tmp_path: Path, build_run: Callable[..., Any], open_store: Callable[[Any], Any]
) -> Iterator[tuple[EvoDAG, int, dict[str, int]]]:
    """Five iterations done, the sixth just started, not finished; the writer holds the run lock, as
    `saddler run` does."""
    with run_lock(tmp_path):
        writer, clock = open_store(tmp_path / "evodag.db")
        fx = build_run(writer, clock, iterations=5, finish=False)
        writer.start_iteration(fx.run_id, 6, 1, ["tr-1", "tr-4", "tr-6"], phase="steering", stall_count=0)
        yield writer, fx.run_id, fx.ids


def test_running_snapshot_reads_while_the_writer_keeps_writing(
    running: tuple[EvoDAG, int, dict[str, int]], tmp_path: Path
) -> None:
    writer, run_id, ids = running
    reader = EvoDAG(tmp_path / "evodag.db", readonly=True)
    snap = status_snapshot(reader, tmp_path)
    assert {k: snap[k] for k in ("state", "iteration", "step", "phase", "epoch", "batch", "stall_count")} == {
        "state": "running", "iteration": 6, "step": "started", "phase": "steering", "epoch": 1,
        "batch": ["tr-1", "tr-4", "tr-6"], "stall_count": 0,
    }  # fmt: skip
    decisions = [(d["iteration"], d["decision"]) for d in snap["last_decisions"]]
    assert decisions == [(2, "rejected"), (3, "invalid"), (4, "accepted"), (5, "accepted"), (6, None)]
    # N2 and N6 both score 0.75 on dev: the recorded pick is N6, accepted on N2's line (via N5), not N2's smaller change
    assert (snap["best_node"], snap["best_dev"], snap["termination_reason"]) == (ids["N6"], 0.75, None)
    # it1 6 + it2 6 + it3 2 + it4 3 + it5 6 train; N1, N2, N5, N6 on dev
    assert (snap["rollouts"], snap["rollouts_by_split"]) == (39, {"train": 23, "dev": 16, "test": 0})
    assert "last decisions: 2 rejected, 3 invalid, 4 accepted, 5 accepted, 6 …" in render_status(snap)
    # the open reader does not block the writer, and sees its new rows on the next snapshot
    writer.add_rollout(
        run_id=run_id,
        node_id=ids["N2"],
        task_id="tr-6",
        split="train",
        seed=1000,
        repetition=0,
        score=0.0,
        passed=False,
        disposition="task_failure",
        cost=0.01,
        cache_key="extra",
    )
    assert status_snapshot(reader, tmp_path)["rollouts"] == 40
    with pytest.raises(sqlite3.OperationalError):
        reader.conn.execute("INSERT INTO runs (config, seed, started_at) VALUES ('{}', 0, 'x')")
    reader.close()
    writer.close()


def test_a_running_run_shows_what_it_has_in_flight(running: tuple[EvoDAG, int, dict[str, int]], tmp_path: Path) -> None:
    writer, _run_id, _ = running
    with EvoDAG(tmp_path / "evodag.db", readonly=True) as reader:
        assert status_snapshot(reader, tmp_path)["schedule"] is None  # an older run, or one not started yet
        state = {"in_flight": [6, 7, 8], "parallel_iterations": 3, "sandboxes": 32, "busy": 12, "queued": 5,
                 "search_eta_s": 3723.4}  # fmt: skip
        (tmp_path / "schedule.json").write_text(json.dumps(state))
        snap = status_snapshot(reader, tmp_path)
    assert snap["schedule"] == state
    assert render_status(snap).splitlines()[-1] == (
        "in flight: iterations 6, 7, 8 (up to 3) · sandboxes 12/32 busy, 5 queued · search ETA 1:02:03"
    )
    writer.close()


def test_state_follows_sentinels_and_run_row(running: tuple[EvoDAG, int, dict[str, int]], tmp_path: Path) -> None:
    writer, run_id, _ = running
    with EvoDAG(tmp_path / "evodag.db", readonly=True) as reader:
        assert status_snapshot(reader, tmp_path)["state"] == "running"
        (tmp_path / "PAUSE").touch()
        assert status_snapshot(reader, tmp_path)["state"] == "paused"
        (tmp_path / "STOP").touch()
        assert status_snapshot(reader, tmp_path)["state"] == "stopping"
        (tmp_path / "STOP").unlink()
        (tmp_path / "PAUSE").unlink()
        writer.update_run(run_id, termination_reason="paused")  # the loop paused at an iteration boundary
        snap = status_snapshot(reader, tmp_path)
        assert (snap["state"], snap["termination_reason"]) == ("paused", "paused")
        assert render_status(snap).splitlines()[0] == f"run {run_id} fixture-run (opsdesk): paused — paused"
    writer.close()


def test_snapshot_before_the_first_iteration(tmp_path: Path, open_store: Callable[[Any], Any]) -> None:
    writer, _ = open_store(tmp_path / "evodag.db")
    run = writer.create_run({"name": "fresh", "benchmark": "opsdesk"}, seed=1)
    with run_lock(tmp_path), EvoDAG(tmp_path / "evodag.db", readonly=True) as reader:
        snap = status_snapshot(reader, tmp_path)
    assert (snap["iteration"], snap["best_node"], snap["last_decisions"], snap["rollouts"]) == (None, None, [], 0)
    lines = render_status(snap).splitlines()
    assert lines[:2] == [f"run {run.id} fresh (opsdesk): running", "iteration —: not started"]
    writer.close()


def test_a_run_nobody_holds_is_stopped_not_running(running: tuple[EvoDAG, int, dict[str, int]], tmp_path: Path) -> None:
    """The run row says running, but the lock is free: the process is gone (killed, crashed, machine rebooted)."""
    writer, run_id, _ = running
    with EvoDAG(tmp_path / "evodag.db", readonly=True) as reader:
        assert (status_snapshot(reader, tmp_path)["running"], status_snapshot(reader, tmp_path)["pid"]) == (
            True,
            os.getpid(),
        )
    (tmp_path / ".lock").unlink()  # as after a reboot: no lock file, no holder
    with EvoDAG(tmp_path / "evodag.db", readonly=True) as reader:
        snap = status_snapshot(reader, tmp_path)
    assert (snap["state"], snap["running"], snap["pid"]) == ("stopped", False, None)
    assert render_status(snap).splitlines()[0] == f"run {run_id} fixture-run (opsdesk): stopped (not running)"
    writer.close()

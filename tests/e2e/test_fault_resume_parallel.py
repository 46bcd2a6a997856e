"""SIGKILL `saddler run` with several iterations in flight, at seeded moments, and resume each time: no session is
paid twice, no finished rollout runs again, and every iteration the killed run had finished stays exactly as it was."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from interrupts import sigint_default

from saddler.run.faults import POINTS as ALL_POINTS

pytestmark = pytest.mark.slow
POINTS = tuple(p for p in ALL_POINTS if p != "finish")
DUPLICATES = "select iteration, role, attempt, count(*) from sessions group by 1, 2, 3 having count(*) > 1"


def _run(run_dir: Path, fault: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "SADDLER_FAULT"}
    if fault:
        env["SADDLER_FAULT"] = fault
    proc = subprocess.run(
        [sys.executable, "-m", "saddler", "run", str(run_dir), "--quiet"],
        env=env, capture_output=True, text=True, timeout=600, preexec_fn=sigint_default,
    )  # fmt: skip
    assert proc.returncode in (0, -signal.SIGKILL), proc.stderr[-3000:]
    return proc.returncode


def _state(run_dir: Path) -> dict[str, Any]:
    """The finished iterations as stored, every rollout row, every session row, and how many iterations were open."""
    with sqlite3.connect(run_dir / "evodag.sqlite") as db:
        finished = {
            row[0]: row
            for row in db.execute(
                "select number, batch, parent_id, candidate_id, decision, evidence, finish_order, started_after, "
                "stall_count from iterations where finished_at is not null"
            )
        }
        open_now = db.execute("select count(*) from iterations where finished_at is null").fetchone()[0]
        rollouts = {
            row[0]: row
            for row in db.execute("select id, node_id, cache_key, score, passed, disposition, seed from rollouts")
        }
        sessions = {
            (row[0], row[1], row[2]): row
            for row in db.execute("select iteration, role, attempt, cost_usd, outcome, result from sessions")
        }
        duplicates = db.execute(DUPLICATES).fetchall()
        keys_twice = db.execute(
            "select node_id, cache_key, count(*) from rollouts group by 1, 2 having count(*) > 1"
        ).fetchall()
    return {"finished": finished, "open": open_now, "rollouts": rollouts, "sessions": sessions,
            "duplicates": duplicates, "keys_twice": keys_twice}  # fmt: skip


def test_killed_with_iterations_in_flight_the_run_resumes_keeping_what_it_had(
    tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    run = make_run(tmp_path / "run", loop={"max_iterations": 9, "parallel_iterations": 3})
    rng = random.Random(20261207)
    moments = [f"{point}:{rng.randint(1, 20 if point == 'rollout' else 3)}" for point in POINTS for _ in range(2)]
    rng.shuffle(moments)
    before = _state(run) if (run / "evodag.sqlite").exists() else None
    kills, in_flight_at_a_kill = 0, 0
    for moment in [*moments, None]:
        code = _run(run, moment)
        after = _state(run)
        if before is not None:
            for number, row in before["finished"].items():
                assert after["finished"].get(number) == row, f"iteration {number} changed after a resume ({moment})"
            for rid, row in before["rollouts"].items():
                assert after["rollouts"].get(rid) == row, f"rollout {rid} changed after a resume ({moment})"
            for key, row in before["sessions"].items():
                assert after["sessions"].get(key) == row, f"session {key} changed after a resume ({moment})"
        assert after["duplicates"] == [] and after["keys_twice"] == []
        if code != 0:
            kills += 1
            in_flight_at_a_kill = max(in_flight_at_a_kill, after["open"])
        before = after
    assert kills >= 8, f"only {kills} of {len(moments)} moments were reached"
    assert in_flight_at_a_kill >= 2, "no kill caught two iterations in flight"
    assert len(before["finished"]) == 9

"""SIGKILL or SIGINT `saddler run` at seeded moments, resume each time, and end where an uninterrupted run ends:
the same DAG, the same rollouts, and the same sessions — each paid for once, its cost counted once."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from interrupts import sigint_default
from repo_paths import FAKE_AGENT

from evodag.store import EvoDAG
from saddler.run.faults import POINTS as ALL_POINTS
from saddler.run.folder import init_run
from saddler.run.loop import Optimizer

pytestmark = pytest.mark.slow
FAKE = FAKE_AGENT
DUPLICATES = "select iteration,role,node_id,count(*) from sessions group by 1,2,3 having count(*)>1"
KILLED = (-signal.SIGKILL, 130)  # SIGKILL; SIGINT ends the CLI with 130 (Ctrl-C)


POINTS = tuple(p for p in ALL_POINTS if p != "finish")  # inside the loop (finish: tests/run/test_disk_full.py)


def _env(fault: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SADDLER_FAULT"}
    if fault:
        env["SADDLER_FAULT"] = fault
    return env


def _saddler_run(run_dir: Path, fault: str | None) -> int:
    proc = subprocess.run(
        [sys.executable, "-m", "saddler", "run", str(run_dir), "--quiet"],
        env=_env(fault),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=sigint_default,
    )
    assert proc.returncode in (0, *KILLED), proc.stderr[-3000:]
    return proc.returncode


def session_record(run_dir: Path) -> dict[str, Any]:
    """Every session row (iteration, role, node, attempt, cost, outcome), the duplicate query and run_stats."""
    with sqlite3.connect(run_dir / "evodag.sqlite") as conn:
        rows = conn.execute(
            "select iteration, role, node_id, attempt, round(cost_usd, 6), outcome from sessions "
            "order by iteration, role, attempt"
        ).fetchall()
        duplicates = conn.execute(DUPLICATES).fetchall()
        stats = conn.execute("select sessions, round(session_cost, 6) from run_stats").fetchone()
    return {"rows": rows, "duplicates": duplicates, "stats": stats}


@pytest.fixture(scope="session")
def assert_same_run(
    dag_signature: Callable[[Path], dict[str, Any]], run_git: Callable[..., Any]
) -> Callable[[Path, Path], None]:
    """`assert_same_run(reference, faulted)`: the resumed run has the uninterrupted run's DAG, rollouts, session
    rows and costs, an intact store and an intact harness repository."""

    def check(reference: Path, faulted: Path) -> None:
        expected, got = dag_signature(reference), dag_signature(faulted)
        assert got["best"] == expected["best"]
        assert got["nodes"] == expected["nodes"] and got["edges"] == expected["edges"]
        assert got["iterations"] == expected["iterations"]
        assert got["rollouts"] == expected["rollouts"]
        want, have = session_record(reference), session_record(faulted)
        assert have["rows"] == want["rows"], "the resumed run's sessions differ from an uninterrupted run's"
        assert have["duplicates"] == [] == want["duplicates"]
        assert have["stats"] == want["stats"] == (len(want["rows"]), round(sum(r[4] for r in want["rows"]), 6))
        with sqlite3.connect(faulted / "evodag.sqlite") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        fsck = run_git(faulted, "fsck", "--no-progress")
        assert fsck.returncode == 0, fsck.stderr

    return check


def test_killed_at_seeded_moments_the_run_resumes_to_the_same_result(
    tmp_path: Path, make_run: Callable[..., Path], assert_same_run: Callable[[Path, Path], None]
) -> None:
    longer = {"max_iterations": 10}  # enough sessions, commits and evidence rounds for every moment to be reached
    reference = make_run(tmp_path / "reference", loop=longer)
    Optimizer(reference, quiet=True).run()
    faulted = make_run(tmp_path / "faulted", loop=longer)
    rng = random.Random(20261129)
    moments = [
        f"{POINTS[i % len(POINTS)]}:{rng.randint(1, 12 if POINTS[i % len(POINTS)] == 'rollout' else 2)}"
        for i in range(14)
    ]
    moments += ["session:1:INT", "evolve:1:INT", "reflect:1:INT"]
    kills = sum(1 for moment in moments if _saddler_run(faulted, moment) in KILLED)
    assert _saddler_run(faulted, None) == 0
    assert kills >= 12, f"only {kills} of {len(moments)} moments were reached"
    assert_same_run(reference, faulted)
    with EvoDAG(faulted / "evodag.sqlite", readonly=True) as store:
        evidence = [e.payload["iteration"] for e in store.events() if e.kind == "diagnosis.evidence"]
    assert len(evidence) == len(set(evidence)), "traces used are counted once per iteration, even after a crash"


def _command_run(path: Path) -> Path:
    init_run(
        path,
        template="opsdesk",
        seed=1,
        backend="command",
        overrides={
            "loop": {"max_iterations": 6, "batch_size": 3, "test_runs": 1, "parallel_iterations": 1},  # serial: the
            "executor": {"workers": 1},  # same result after kills (test_fault_resume_parallel.py: several in flight)
            "sessions": {"command": f"{sys.executable} {FAKE} {{prompt_file}}"},
        },
    )
    return path


@pytest.fixture(scope="module")
def command_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run with the command backend: a fake agent that reports $0.0125 a session."""
    reference = _command_run(tmp_path_factory.mktemp("command") / "reference")
    assert _saddler_run(reference, None) == 0
    want = session_record(reference)
    assert want["stats"][1] > 0 and all(cost == 0.0125 for *_, cost, _ in want["rows"])
    return reference


def test_a_paid_backend_is_charged_once_per_session_through_kills_and_interrupts(
    tmp_path: Path, command_reference: Path, assert_same_run: Callable[[Path, Path], None]
) -> None:
    """Every fault point, SIGKILL and SIGINT: the resumed run's sessions and cost equal an uninterrupted run's."""

    faulted = _command_run(tmp_path / "faulted")
    moments = [
        "session:1", "evolve:1:INT", "commit:1", "write:1:INT", "reflect:1", "rollout:3:INT",
        "session:1:INT", "evolve:1", "commit:1:INT", "write:1", "reflect:1:INT", "rollout:5",
    ]  # fmt: skip
    reached = [moment for moment in moments if _saddler_run(faulted, moment) in KILLED]
    assert _saddler_run(faulted, None) == 0
    assert reached == moments, f"moments not reached: {sorted(set(moments) - set(reached))}"
    assert_same_run(command_reference, faulted)


def test_ctrl_c_while_an_agent_works_pays_nothing_twice(
    tmp_path: Path, command_reference: Path, assert_same_run: Callable[[Path, Path], None]
) -> None:
    """SIGINT from outside at a moment the run does not choose (soon after its 4th session), then resume."""
    faulted = _command_run(tmp_path / "faulted")
    proc = subprocess.Popen(
        [sys.executable, "-m", "saddler", "run", str(faulted), "--quiet"],
        env=_env(None),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=sigint_default,
    )
    db = faulted / "evodag.sqlite"
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if db.is_file():
            with sqlite3.connect(db) as conn:
                found = conn.execute("select count(*) from sqlite_master where name = 'sessions'").fetchone()[0]
                if found and conn.execute("select count(*) from sessions").fetchone()[0] >= 4:
                    break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    assert _saddler_run(faulted, None) == 0
    assert_same_run(command_reference, faulted)

"""SIGKILL `saddler run` at seeded moments, resume each time, and end where an uninterrupted run ends."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from loop_helpers import dag_signature, git, make_run

from evodag.store import EvoDAG
from saddler.run.loop import Optimizer

pytestmark = pytest.mark.slow
POINTS = ("rollout", "session", "commit", "write", "reflect")


def _saddler_run(run_dir: Path, fault: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "SADDLER_FAULT"}
    if fault:
        env["SADDLER_FAULT"] = fault
    proc = subprocess.run(
        [sys.executable, "-m", "saddler", "run", str(run_dir), "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, -9), proc.stderr[-3000:]
    return proc.returncode


def test_killed_at_seeded_moments_the_run_resumes_to_the_same_result(tmp_path: Path) -> None:
    reference = make_run(tmp_path / "reference")
    Optimizer(reference, quiet=True).run()
    faulted = make_run(tmp_path / "faulted")
    rng = random.Random(20261129)
    moments = [
        f"{POINTS[i % len(POINTS)]}:{rng.randint(1, 12 if POINTS[i % len(POINTS)] == 'rollout' else 2)}"
        for i in range(12)
    ]
    kills = 0
    for moment in moments:
        if _saddler_run(faulted, moment) == -9:
            kills += 1
    assert _saddler_run(faulted, None) == 0
    assert kills >= 10, f"only {kills} of {len(moments)} moments were reached"
    expected, got = dag_signature(reference), dag_signature(faulted)
    assert got["best"] == expected["best"]
    assert got["nodes"] == expected["nodes"] and got["edges"] == expected["edges"]
    assert got["rollouts"] == expected["rollouts"]
    with sqlite3.connect(faulted / "evodag.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with EvoDAG(faulted / "evodag.sqlite", readonly=True) as store:
        evidence = [e.payload["iteration"] for e in store.events() if e.kind == "diagnosis.evidence"]
    assert len(evidence) == len(set(evidence)), "traces used are counted once per iteration, even after a crash"
    fsck = git(faulted, "fsck", "--no-progress")
    assert fsck.returncode == 0, fsck.stderr

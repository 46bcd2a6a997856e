"""One set of run controls (pause, resume, stop, kill, running?) for the main loop and fleet mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from saddler.cli.app import app
from saddler.control import PAUSED, STOP_REQUESTED, RunControls
from saddler.modes.fleet import ops as fleet_ops
from saddler.modes.fleet.config import FleetPaths, FleetSpec

HOLDER = """
import signal, sys, time
from pathlib import Path
from saddler.runlock import run_lock
if sys.argv[2] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with run_lock(Path(sys.argv[1])):
    Path(sys.argv[1], "held").write_text("yes")
    time.sleep(120)
"""


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    root.mkdir()
    (root / "saddler.toml").write_text("[run]\n")
    return root


def _hold(root: Path, mode: str = "plain") -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), mode])
    deadline = time.monotonic() + 30
    while not (root / "held").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the lock holder did not start"
        time.sleep(0.02)
    return proc


def test_pause_stop_and_resume_are_the_sentinels_the_loop_reads(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    controls = RunControls(root)
    assert controls.asked() is None
    assert CliRunner().invoke(app, ["pause", str(root)]).exit_code == 0
    assert controls.asked() == PAUSED and (root / "PAUSE").exists()
    assert CliRunner().invoke(app, ["stop", str(root)]).exit_code == 0
    assert controls.asked() == STOP_REQUESTED  # stop wins over pause
    resumed = CliRunner().invoke(app, ["resume", str(root)])
    assert resumed.exit_code == 0 and resumed.output == f"resumable: run `saddler run {root}` to continue\n"
    assert controls.asked() is None and not (root / "PAUSE").exists() and not (root / "STOP").exists()


def test_kill_ends_the_process_holding_the_run_lock_and_returns_once_it_is_free(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    proc = _hold(root)
    assert RunControls(root).holder() == proc.pid and RunControls(root).running()
    result = CliRunner().invoke(app, ["kill", str(root), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"killed": [proc.pid]}
    assert not RunControls(root).running()
    assert proc.wait(timeout=10) != 0


def test_a_holder_that_ignores_sigterm_gets_sigkill_after_the_grace(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    proc = _hold(root, "ignore-term")
    assert RunControls(root).kill(grace_s=0.5) == [proc.pid]
    assert proc.wait(timeout=10) == -9 and not RunControls(root).running()


def test_kill_on_a_folder_nobody_runs_says_so(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    result = CliRunner().invoke(app, ["kill", str(root)])
    assert (result.exit_code, result.output) == (0, "not running: nothing to kill\n")


def test_fleet_mode_uses_the_same_controls_with_the_seeds_sentinel(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    root.mkdir()
    paths = FleetPaths(root, FleetSpec())
    controls = fleet_ops.controls(paths)
    assert (controls.root, controls.pause_file) == (root, root / ".paused")
    fleet_ops.pause(paths)
    assert paths.paused.exists() and controls.asked() == PAUSED
    assert fleet_ops.resume(paths) == f"not running: start it with `saddler fleet run {root}`"
    assert not paths.paused.exists()
    proc = _hold(root)
    try:
        assert controls.running() and controls.holder() == proc.pid
    finally:
        os.kill(proc.pid, 9)
        proc.wait()
    assert not controls.running()


@pytest.mark.parametrize("command", ["pause", "stop", "resume", "kill"])
def test_controls_refuse_a_folder_that_is_not_a_run(tmp_path: Path, command: str) -> None:
    result = CliRunner().invoke(app, [command, str(tmp_path)])
    assert result.exit_code == 2
    assert result.output == f"error: {tmp_path} is not a run folder (no saddler.toml); create one with `saddler init`\n"

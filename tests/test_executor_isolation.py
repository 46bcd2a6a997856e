"""Isolation of one rollout: limits, timeouts, scrubbed environment, failure mapping, sandbox."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from executor_helpers import child_can_import_fakes, executor_config, make_harness, make_job, pid_alive

from saddler.benchmark import RolloutResult
from saddler.errors import ExecutorError
from saddler.executor.environment import BWRAP_MISSING, MARKER_VAR, check_sandbox, sweep_stale_private_dirs
from saddler.executor.isolation import IsolatedRunner
from saddler.executor.local import LocalExecutor
from saddler.executor.reaper import kill_rollout, marked_pids

SECRET = "sk-test-DO-NOT-LEAK-4242"


@pytest.fixture(autouse=True)
def _fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    child_can_import_fakes(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    monkeypatch.setenv("SADDLER_TEST_ALLOWED", "visible-value")


def _bwrap_usable() -> str | None:
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {probe.stderr.strip()}"
    return None


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_successful_rollout_returns_the_benchmark_result(tmp_path: Path, mode: str) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=30), mode)
    job = make_job(make_harness(tmp_path / "h"), tmp_path / "traces", "ok-train-1", seed=3)
    result = runner.run(job)
    assert result.task_id == "ok-train-1"
    assert result.disposition in ("success", "task_failure")
    assert result.trace_path == str(tmp_path / "traces" / "ok-train-1-s3.json")
    assert Path(result.trace_path).is_file()
    assert result.duration_s > 0
    assert runner.run(job).score == result.score  # deterministic
    runner.close()


@pytest.mark.parametrize(
    ("task_id", "needle"),
    [
        ("crash-1", "RuntimeError: harness blew up on purpose"),
        ("exit-1", "exit code 7"),
        ("oom-1", "out of memory (limit 256 MiB)"),
    ],
)
@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_crashes_become_infra_errors_with_stderr_tail(tmp_path: Path, task_id: str, needle: str, mode: str) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=30, memory_mb=256), mode)
    result = runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", task_id))
    runner.close()
    assert (result.disposition, result.passed, result.score) == ("infra_error", False, 0.0)
    assert needle in result.error_tail
    assert len(result.error_tail) <= 2048


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_timeout_is_recorded_and_per_job_override_applies(tmp_path: Path, mode: str) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=60), mode)
    start = time.monotonic()
    result = runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", "sleep-1", timeout_s=0.5))
    assert time.monotonic() - start < 10
    assert result.disposition == "timeout"
    assert "timed out after 0.5s" in result.error_tail
    runner.close()


def _hostile_run(tmp_path: Path, sandbox: str, mode: str | None = None) -> tuple[object, Path, Path]:
    config = executor_config(
        timeout_s=2.0, memory_mb=512, sandbox=sandbox, env_allow=["PATH", "PYTHONPATH", "SADDLER_TEST_ALLOWED"]
    )
    outside = tmp_path / "outside" / "escaped.txt"
    outside.parent.mkdir()
    traces = tmp_path / "traces"
    token = str(random.Random(str(tmp_path)).randrange(10**8, 10**9))
    prompt = json.dumps({"outside": str(outside), "token": token})
    harness = make_harness(tmp_path / "h")
    jobs = [make_job(harness, traces, "hostile-1", prompt=prompt), make_job(harness, traces, "ok-1")]
    executor = LocalExecutor(config, mode)
    got: dict[str, RolloutResult] = {}
    executor.run(jobs, lambda job, result: got.__setitem__(job.task.id, result))
    assert got["ok-1"].disposition in ("success", "task_failure")  # the caller carried on
    executor.run(jobs[1:], lambda job, result: got.__setitem__("again", result))
    assert got["again"].score == got["ok-1"].score
    executor.close()
    assert _sleepers(token) == []  # both setsid escapees were killed (seen from this namespace)
    return got["hostile-1"], traces, outside


def _sleepers(token: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if cmd.startswith(b"sleep\x00") and token.encode() in cmd and pid_alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def _assert_contained(result: object, traces: Path) -> None:
    assert isinstance(result, RolloutResult)
    assert result.disposition == "timeout"
    assert not result.passed
    env_dump = (traces / "env.txt").read_text()
    assert "SADDLER_TEST_ALLOWED=visible-value" in env_dump  # the dump is real ...
    assert "SADDLER_TEST_ALLOWED=visible-value" in result.error_tail
    for text in (env_dump, result.error_tail):  # ... and carries no secret
        assert SECRET not in text
        assert "ANTHROPIC_API_KEY" not in text and "MY_SERVICE_TOKEN" not in text
    assert (traces / "alloc.txt").read_text() == "MemoryError"
    assert len((traces / "pids.txt").read_text().split()) == 4  # it did start its escapees


def _assert_pids_dead(traces: Path) -> None:
    pids = [int(p) for p in (traces / "pids.txt").read_text().split()]
    assert [pid for pid in pids if pid_alive(pid)] == []


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_hostile_rollout_is_contained_without_sandbox(tmp_path: Path, mode: str) -> None:
    result, traces, outside = _hostile_run(tmp_path, "none", mode)
    _assert_contained(result, traces)
    _assert_pids_dead(traces)  # same pid namespace: the rollout's own pids are checkable
    assert (traces / "outside.txt").read_text() == "written"  # only bwrap can stop absolute writes
    assert outside.read_text() == "escaped"


def test_hostile_rollout_is_contained_in_bwrap(tmp_path: Path) -> None:
    reason = _bwrap_usable()
    if reason:
        pytest.skip(reason)
    result, traces, outside = _hostile_run(tmp_path, "bwrap")
    _assert_contained(result, traces)
    assert not outside.exists()
    assert (traces / "outside.txt").read_text().startswith("refused:")


def test_bwrap_has_no_network_and_a_read_only_harness(tmp_path: Path) -> None:
    reason = _bwrap_usable()
    if reason:
        pytest.skip(reason)
    harness = make_harness(tmp_path / "h")
    runner = IsolatedRunner(executor_config(sandbox="bwrap", timeout_s=30))
    assert runner.run(make_job(harness, tmp_path / "t", "ok-1")).disposition in ("success", "task_failure")
    cmd = runner.command(Path("j"), Path("r"), make_job(harness, tmp_path / "t", "ok-1"), tmp_path)
    assert "--unshare-net" in cmd
    assert cmd[cmd.index(str(harness)) - 1] == "--ro-bind"


def test_missing_bwrap_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ExecutorError) as err:
        check_sandbox(executor_config(sandbox="bwrap"))
    assert str(err.value) == BWRAP_MISSING
    assert "apt-get install bubblewrap" in str(err.value)
    check_sandbox(executor_config(sandbox="none"))


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_leftovers_of_a_normal_exit_are_killed(tmp_path: Path, mode: str) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=30), mode)
    result = runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", "daemon-1"))
    assert result.disposition in ("success", "task_failure")
    leftover = int((tmp_path / "t" / "daemon-1.pid").read_text())
    assert not pid_alive(leftover)
    assert runner._active == {}
    runner.close()


def test_marked_pids_finds_exactly_the_marked_processes(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], MARKER_VAR: "m1"}
    proc = subprocess.Popen(["sleep", "30"], env=env)
    other = subprocess.Popen(["sleep", "30"], env={**env, MARKER_VAR: "m12"})
    try:
        assert marked_pids("m1") == [proc.pid]
        assert sorted(marked_pids("m1", "m12")) == sorted([proc.pid, other.pid])
        kill_rollout(proc.pid, "m1", "m12", spare=other.pid)
        proc.wait(timeout=5)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_sweep_removes_only_dirs_of_dead_owners(tmp_path: Path) -> None:
    dead = tmp_path / "saddler-rollout-999999999-abc"
    mine = tmp_path / f"saddler-rollout-{os.getpid()}-abc"
    alive = tmp_path / f"saddler-rollout-{os.getppid()}-abc"
    other = tmp_path / "saddler-rollout-legacy"
    for path in (dead, mine, alive, other):
        (path / "tmp").mkdir(parents=True)
    assert sweep_stale_private_dirs(str(tmp_path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (mine, alive, other))


def test_private_dirs_are_removed_after_each_rollout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "private"
    base.mkdir()
    monkeypatch.setenv("SADDLER_ROLLOUT_TMP", str(base))
    runner = IsolatedRunner(executor_config(timeout_s=30))
    for task_id in ("ok-1", "crash-1"):
        runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", task_id))
    assert [p.name for p in base.iterdir()] == [runner._home.name]  # only the fork server's home
    runner.close()
    assert list(base.iterdir()) == []


def test_a_rollout_that_kills_its_fork_server_is_an_infra_error(tmp_path: Path) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=20), "fork")
    harness = make_harness(tmp_path / "h")
    start = time.monotonic()
    result = runner.run(make_job(harness, tmp_path / "t", "patricide-1"))
    assert time.monotonic() - start < 10  # noticed at once, not at the timeout
    assert result.disposition == "infra_error"
    assert "fork server exited" in result.error_tail
    assert runner._idle == []  # the dead server was dropped ...
    assert runner.run(make_job(harness, tmp_path / "t", "ok-1")).disposition in ("success", "task_failure")
    assert len(runner._idle) == 1  # ... and a fresh one serves the next rollout
    runner.close()


@pytest.mark.parametrize("mode", ["fork", "spawn"])
@pytest.mark.parametrize("task_id", ["ghost-1", "ghost-2-hang"])
def test_an_unmarked_orphan_in_its_own_session_is_killed(tmp_path: Path, mode: str, task_id: str) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=1.5), mode)
    result = runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", task_id))
    assert result.disposition == ("timeout" if task_id.endswith("hang") else "success") or not result.passed
    ghost = int((tmp_path / "t" / f"{task_id}.pid").read_text())
    assert not pid_alive(ghost)
    runner.close()


def test_a_dropped_runner_stops_its_fork_servers(tmp_path: Path) -> None:
    import gc

    runner = IsolatedRunner(executor_config(timeout_s=30), "fork")
    runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", "ok-1"))
    [server] = runner._idle
    home = runner._home
    del runner
    gc.collect()
    assert server.proc.poll() is not None
    assert not home.exists()


def test_rollouts_die_with_a_killed_optimizer(tmp_path: Path) -> None:
    """SIGKILL the process running the executor mid-rollout: its fork server kills the rollout's tree."""
    traces = tmp_path / "t"
    job = make_job(make_harness(tmp_path / "h"), traces, "ghost-3-hang")
    script = (
        "import sys\n"
        "from saddler.config import ExecutorConfig\n"
        "from saddler.executor.base import RolloutJob\n"
        "from saddler.executor.isolation import IsolatedRunner\n"
        "runner = IsolatedRunner(ExecutorConfig.model_validate({'timeout_s': 120}), 'fork')\n"
        "runner.run(RolloutJob.from_json(sys.stdin.read()))\n"
    )
    optimizer = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, text=True)
    assert optimizer.stdin is not None
    optimizer.stdin.write(job.to_json())
    optimizer.stdin.close()
    pid_file = traces / "ghost-3-hang.pid"
    deadline = time.monotonic() + 30
    while not (pid_file.is_file() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    ghost = int(pid_file.read_text())
    assert pid_alive(ghost)
    optimizer.kill()
    optimizer.wait()
    deadline = time.monotonic() + 10
    while pid_alive(ghost) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(ghost)

"""Isolation of one rollout: limits, timeouts, scrubbed environment, failure mapping, sandbox mechanics.

Tests that read pids a rollout wrote run with `sandbox = "none"`: inside bubblewrap a rollout sees its own pid
namespace, so its pids mean nothing here; their bubblewrap twins check from the host side instead."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from saddler.benchmark import RolloutResult
from saddler.executor.environment import MARKER_VAR, sweep_stale_private_dirs
from saddler.executor.isolation import IsolatedRunner
from saddler.executor.local import LocalExecutor
from saddler.executor.reaper import kill_rollout, marked_pids
from saddler.executor.workspace import RolloutFolder
from saddler.procs import descendants

SECRET = "sk-test-DO-NOT-LEAK-4242"
SANDBOXES = ["bwrap", "landlock", "none"]


def pid_alive(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, fakes_importable: None) -> None:
    """Rollout children import the fakes; secrets (and one allowed variable) are in this environment."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    monkeypatch.setenv("SADDLER_TEST_ALLOWED", "visible-value")


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_successful_rollout_returns_the_benchmark_result(
    tmp_path: Path,
    mode: str,
    sandbox: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
    require_sandbox: Callable[[str], None],
) -> None:
    require_sandbox(sandbox)
    runner = IsolatedRunner(executor_config(timeout_s=30, sandbox=sandbox), mode)
    assert runner.sandbox.mode == sandbox
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
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_crashes_become_infra_errors_with_stderr_tail(
    tmp_path: Path,
    task_id: str,
    needle: str,
    mode: str,
    sandbox: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
    require_sandbox: Callable[[str], None],
) -> None:
    require_sandbox(sandbox)
    runner = IsolatedRunner(executor_config(timeout_s=30, memory_mb=256, sandbox=sandbox), mode)
    result = runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", task_id))
    runner.close()
    assert (result.disposition, result.passed, result.score) == ("infra_error", False, 0.0)
    assert needle in result.error_tail
    assert len(result.error_tail) <= 2048


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_timeout_is_recorded_and_per_job_override_applies(
    tmp_path: Path,
    mode: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=60), mode)
    start = time.monotonic()
    result = runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", "sleep-1", timeout_s=0.5))
    assert time.monotonic() - start < 10
    assert result.disposition == "timeout"
    assert "timed out after 0.5s" in result.error_tail
    runner.close()


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_the_error_tail_keeps_saddlers_timeout_marker_and_the_last_output(
    tmp_path: Path,
    mode: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=60), mode)
    result = runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", "chatty-1", timeout_s=1.0))
    runner.close()
    assert result.disposition == "timeout"
    assert result.error_tail.startswith("[saddler] timed out after 1s\n")  # not cut off by 10 kB of warnings
    assert result.error_tail.rstrip().endswith("last line before the hang") and len(result.error_tail) <= 2048


@pytest.fixture
def hostile_run(
    executor_config: Callable[..., Any], make_harness: Callable[..., Path], make_job: Callable[..., Any]
) -> Callable[..., tuple[object, Path, Path]]:
    """`hostile_run(tmp_path, sandbox, mode=None)`: the hostile rollout then an honest one (twice) through a
    local executor; returns (the hostile result, its trace folder, the file outside it may not write)."""

    def run(tmp_path: Path, sandbox: str, mode: str | None = None) -> tuple[object, Path, Path]:
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

    return run


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
def test_hostile_rollout_is_contained_without_sandbox(
    tmp_path: Path, mode: str, hostile_run: Callable[..., tuple[object, Path, Path]]
) -> None:
    result, traces, outside = hostile_run(tmp_path, "none", mode)
    _assert_contained(result, traces)
    _assert_pids_dead(traces)  # same pid namespace: the rollout's own pids are checkable
    assert (traces / "outside.txt").read_text() == "written"  # a sandbox is what stops absolute writes
    assert outside.read_text() == "escaped"


@pytest.mark.parametrize("sandbox", ["bwrap", "landlock"])
@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_hostile_rollout_is_contained_in_a_sandbox(
    tmp_path: Path,
    mode: str,
    sandbox: str,
    require_sandbox: Callable[[str], None],
    hostile_run: Callable[..., tuple[object, Path, Path]],
) -> None:
    require_sandbox(sandbox)
    result, traces, outside = hostile_run(tmp_path, sandbox, mode)
    _assert_contained(result, traces)
    assert not outside.exists()
    assert (traces / "outside.txt").read_text().startswith("refused:")


@pytest.mark.parametrize("network", [False, True])
def test_bwrap_argv_shares_the_network_only_when_asked(
    tmp_path: Path, network: bool, executor_config: Callable[..., Any], require_sandbox: Callable[[str], None]
) -> None:
    require_sandbox("bwrap")
    runner = IsolatedRunner(executor_config(sandbox="bwrap", network=network, timeout_s=30))
    folder = RolloutFolder(tmp_path / "private")
    cmd = runner.command(folder)
    assert "--unshare-all" in cmd and ("--share-net" in cmd) == network
    assert cmd[cmd.index("--bind") + 1 : cmd.index("--bind") + 3] == [str(folder.root)] * 2  # the only writable one
    assert cmd[cmd.index("--cap-drop") + 1] == "ALL"
    runner.close()


def test_each_rollout_runs_on_its_own_copy_of_the_harness(
    tmp_path: Path, executor_config: Callable[..., Any], make_harness: Callable[..., Path], make_job: Callable[..., Any]
) -> None:
    harness = make_harness(tmp_path / "h")
    runner = IsolatedRunner(executor_config(timeout_s=30))
    result = runner.run(make_job(harness, tmp_path / "t", "crash-1"))
    assert str(harness) in result.error_tail or "harness blew up" in result.error_tail
    assert "/harness" not in result.error_tail.replace(str(harness), "")  # private paths are named as the job's
    assert sorted(p.name for p in harness.iterdir()) == ["policy.txt"]
    runner.close()


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_leftovers_of_a_normal_exit_are_killed(
    tmp_path: Path,
    mode: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=30, sandbox="none"), mode)
    result = runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", "daemon-1"))
    assert result.disposition in ("success", "task_failure")
    leftover = int((tmp_path / "t" / "daemon-1.pid").read_text())
    assert not pid_alive(leftover)
    assert runner._active == {}
    runner.close()


@pytest.mark.parametrize("task_id", ["daemon-1", "ghost-1", "ghost-2-hang"])
def test_nothing_a_rollout_leaves_survives_in_its_sandbox(
    tmp_path: Path,
    task_id: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
    require_sandbox: Callable[[str], None],
) -> None:
    require_sandbox("bwrap")
    runner = IsolatedRunner(executor_config(timeout_s=1.5, sandbox="bwrap"), "fork")
    runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", task_id))
    [server] = runner._idle
    assert server.server_pid != server.pid and pid_alive(server.server_pid)  # pid 1 of the sandbox, under bwrap
    assert [pid for pid in descendants(server.server_pid) if pid_alive(pid)] == []
    assert list(server.exchange.iterdir()) == []  # and the exchange folder is empty for the next rollout
    runner.close()


def _environ_set_up(pid: int, timeout_s: float = 5.0) -> None:
    """Wait until the kernel has written `pid`'s new environment: Popen returns once exec has closed the
    close-on-exec pipe, which happens before the new image's environment is in place, so a /proc scan right after
    can read it empty (seen on a loaded CI machine)."""
    deadline = time.monotonic() + timeout_s
    while not Path(f"/proc/{pid}/environ").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_marked_pids_finds_exactly_the_marked_processes(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], MARKER_VAR: "m1"}
    proc = subprocess.Popen(["sleep", "30"], env=env)
    other = subprocess.Popen(["sleep", "30"], env={**env, MARKER_VAR: "m12"})
    try:
        for child in (proc, other):
            _environ_set_up(child.pid)
        assert marked_pids("m1") == [proc.pid]
        assert sorted(marked_pids("m1", "m12")) == sorted([proc.pid, other.pid])
        kill_rollout(proc.pid, "m1", "m12", spare=(other.pid,))
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


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_private_dirs_are_removed_after_each_rollout(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sandbox: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
    require_sandbox: Callable[[str], None],
) -> None:
    require_sandbox(sandbox)
    base = tmp_path / "private"
    base.mkdir()
    monkeypatch.setenv("SADDLER_ROLLOUT_TMP", str(base))
    runner = IsolatedRunner(executor_config(timeout_s=30, sandbox=sandbox))
    for task_id in ("ok-1", "crash-1"):
        runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", task_id))
    kept = sorted(p.name for p in base.iterdir())
    if sandbox == "bwrap":  # the fork server's home, and its (empty) exchange folder
        [server] = runner._idle
        assert kept == sorted([runner._home.name, server.exchange.name]) and list(server.exchange.iterdir()) == []
    else:
        assert kept == [runner._home.name]
    runner.close()
    assert list(base.iterdir()) == []


def test_a_rollout_that_kills_its_fork_server_is_an_infra_error(
    tmp_path: Path, executor_config: Callable[..., Any], make_harness: Callable[..., Path], make_job: Callable[..., Any]
) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=20, sandbox="none"), "fork")
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


def test_in_bwrap_a_rollout_cannot_kill_its_fork_server(
    tmp_path: Path,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
    require_sandbox: Callable[[str], None],
) -> None:
    require_sandbox("bwrap")
    runner = IsolatedRunner(executor_config(timeout_s=1.5, sandbox="bwrap"), "fork")
    harness = make_harness(tmp_path / "h")
    assert runner.run(make_job(harness, tmp_path / "t", "patricide-1")).disposition == "timeout"
    assert len(runner._idle) == 1  # the server (pid 1 of its sandbox) ignored the kill and serves on
    assert runner.run(make_job(harness, tmp_path / "t", "ok-1")).disposition in ("success", "task_failure")
    runner.close()


@pytest.mark.parametrize("mode", ["fork", "spawn"])
@pytest.mark.parametrize("task_id", ["ghost-1", "ghost-2-hang"])
def test_an_unmarked_orphan_in_its_own_session_is_killed(
    tmp_path: Path,
    mode: str,
    task_id: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
) -> None:
    runner = IsolatedRunner(executor_config(timeout_s=1.5, sandbox="none"), mode)
    result = runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", task_id))
    assert result.disposition == ("timeout" if task_id.endswith("hang") else "success") or not result.passed
    ghost = int((tmp_path / "t" / f"{task_id}.pid").read_text())
    assert not pid_alive(ghost)
    runner.close()


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_dropped_runner_stops_its_fork_servers(
    tmp_path: Path,
    sandbox: str,
    executor_config: Callable[..., Any],
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
    require_sandbox: Callable[[str], None],
) -> None:
    import gc

    require_sandbox(sandbox)
    runner = IsolatedRunner(executor_config(timeout_s=30, sandbox=sandbox), "fork")
    runner.run(make_job(make_harness(tmp_path / "h"), tmp_path / "t", "ok-1"))
    [server] = runner._idle
    home = runner._home
    del runner
    gc.collect()
    assert server.proc.poll() is not None and not pid_alive(server.server_pid)
    assert not home.exists()
    assert server.exchange is None or not server.exchange.exists()


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_rollouts_die_with_a_killed_optimizer(
    tmp_path: Path,
    sandbox: str,
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
    require_sandbox: Callable[[str], None],
) -> None:
    """SIGKILL the process running the executor mid-rollout: its fork server kills the rollout's tree (under
    bubblewrap the server is pid 1 of the sandbox, and the whole sandbox goes with it)."""
    require_sandbox(sandbox)
    job = make_job(make_harness(tmp_path / "h"), tmp_path / "t", "ghost-3-hang")
    script = (
        "import sys\n"
        "from saddler.config import ExecutorConfig\n"
        "from saddler.executor.base import RolloutJob\n"
        "from saddler.executor.isolation import IsolatedRunner\n"
        f"config = ExecutorConfig.model_validate({{'timeout_s': 120, 'sandbox': {sandbox!r}}})\n"
        "runner = IsolatedRunner(config, 'fork')\n"
        "runner.run(RolloutJob.from_json(sys.stdin.read()))\n"
    )
    sleepers_before = set(_sleep_pids())
    optimizer = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, text=True)
    assert optimizer.stdin is not None
    optimizer.stdin.write(job.to_json())
    optimizer.stdin.close()
    deadline = time.monotonic() + 30
    ghosts: set[int] = set()
    while not ghosts and time.monotonic() < deadline:  # until the rollout's orphan has become `sleep`
        time.sleep(0.05)
        ghosts = (set(_sleep_pids()) - sleepers_before) & set(descendants(optimizer.pid))
    assert ghosts and all(pid_alive(pid) for pid in ghosts)
    optimizer.kill()
    optimizer.wait()
    deadline = time.monotonic() + 10
    while any(pid_alive(pid) for pid in ghosts) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pid_alive(pid) for pid in ghosts)


def _sleep_pids() -> list[int]:
    """Host pids of live `sleep 10000` processes (what ghost rollouts leave behind)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (proc / "cmdline").read_bytes() == b"sleep\x0010000\x00" and pid_alive(int(proc.name)):
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found

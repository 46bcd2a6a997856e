"""Hostile rollouts (issue 12.5): what a rollout tried against the optimizer, and what each sandbox stops.

The "optimizer" is a real child process started with a secret in its environment (as a user's shell gives
it one), running a `LocalExecutor` on: an honest rollout, an `attack-*` rollout (reads every /proc/<pid>/environ,
connects to a local TCP listener, writes $HOME, the run folder, evodag.sqlite and the shared harness snapshot,
signals the optimizer), and the honest rollout again, which must score as before. `leave-*` then `look-*` on one
worker check that nothing one rollout writes reaches the next. Under `bwrap` everything is contained; under the
fallbacks the test asserts what is contained and that the start-up warning names the rest.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_benchmarks import sysv_key

from saddler.config import ExecutorConfig
from saddler.errors import ExecutorError
from saddler.executor import landlock, sandbox
from saddler.executor.sandbox import resolve_sandbox

SECRET = "sk-hostile-test-DO-NOT-LEAK-7171"
OPTIMIZER = """
import json, sys
import saddler.executor.sandbox as sandbox
from saddler.config import ExecutorConfig
from saddler.executor.base import RolloutJob
from saddler.executor.local import LocalExecutor

spec = json.loads(sys.stdin.read())
if spec["no_bwrap"]:
    sandbox.bwrap_status = lambda: (False, "bubblewrap is not installed")
executor = LocalExecutor(ExecutorConfig.model_validate(spec["config"]))
results = []
for job in spec["jobs"]:
    executor.run([RolloutJob.from_json(job)], lambda job, result: results.append(result.to_dict()))
executor.close()
box = executor.runner.sandbox
print(json.dumps({"results": results, "mode": box.mode, "warning": box.warning(), "uncontained": box.uncontained()}))
"""


@pytest.fixture
def run_optimizer(tests_dir: str) -> Callable[..., dict[str, Any]]:
    """`run_optimizer(tmp_path, config, jobs, no_bwrap=False)`: run the jobs one after another in a fresh optimizer
    process whose environment holds the secret; returns its report (results, sandbox mode, warning)."""

    def run(tmp_path: Path, config: dict[str, Any], jobs: list[Any], no_bwrap: bool = False) -> dict[str, Any]:
        env = {**os.environ, "ANTHROPIC_API_KEY": SECRET, "HOME": str(tmp_path / "home")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tests_dir, env.get("PYTHONPATH", "")) if p)
        spec = {"config": {"workers": 1, "timeout_s": 30, **config}, "jobs": [j.to_json() for j in jobs]}
        spec["no_bwrap"] = no_bwrap
        proc = subprocess.run(
            [sys.executable, "-c", OPTIMIZER],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return out

    return run


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP listener on the loopback interface (its port): what a rollout must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


@pytest.fixture
def attack(
    run_optimizer: Callable[..., dict[str, Any]], make_harness: Callable[..., Path], make_job: Callable[..., Any]
) -> Callable[..., dict[str, Any]]:
    """`attack(tmp_path, port, config, no_bwrap=False)`: the honest rollout, the attack, the honest rollout again;
    returns the optimizer's report plus `attack` (what the attack saw) and `targets` (the files it aimed at)."""

    def run(tmp_path: Path, port: int, config: dict[str, Any], no_bwrap: bool = False) -> dict[str, Any]:
        home, run = tmp_path / "home", tmp_path / "run"
        home.mkdir()
        run.mkdir()
        with sqlite3.connect(run / "evodag.sqlite") as db:
            db.execute("CREATE TABLE t (x)")
        shared = make_harness(run / "snapshot")  # what the evaluator hands the executor: one folder per tree
        targets = [home / ".bashrc", run / "saddler.toml", run / "evodag.sqlite", shared / "policy.txt"]
        (home / ".bashrc").write_text("# the user's\n")
        (run / "saddler.toml").write_text("[run]\n")
        prompt = json.dumps(
            {"secret": SECRET, "port": port, "optimizer_pid": os.getpid(), "write": [str(t) for t in targets]}
        )
        traces = run / "traces"
        jobs = [
            make_job(shared, traces, "ok-1"),
            make_job(shared, traces, "attack-1", prompt=prompt),
            make_job(shared, traces, "ok-1"),
        ]
        report = run_optimizer(tmp_path, config, jobs, no_bwrap)
        report["attack"] = json.loads((traces / "attack.json").read_text())
        report["targets"] = {str(t): t.read_bytes() for t in targets}
        return report

    return run


def assert_untouched(report: dict[str, Any], tmp_path: Path) -> None:
    for path, data in report["targets"].items():
        assert b"planted" not in data, path
        assert report["attack"]["writes"][path].startswith("refused"), path


@pytest.mark.parametrize("mode", ["bwrap", "landlock", "none"])
def test_a_hostile_rollout_never_changes_a_later_result(
    tmp_path: Path,
    listener: int,
    mode: str,
    require_sandbox: Callable[[str], None],
    attack: Callable[..., dict[str, Any]],
) -> None:
    require_sandbox(mode)
    report = attack(tmp_path, listener, {"sandbox": mode})
    before, hostile, after = report["results"]
    assert hostile["task_id"] == "attack-1"
    assert (after["score"], after["passed"]) == (before["score"], before["passed"])
    assert report["mode"] == mode


def test_bwrap_contains_every_attack(
    tmp_path: Path, listener: int, require_sandbox: Callable[[str], None], attack: Callable[..., dict[str, Any]]
) -> None:
    require_sandbox("bwrap")
    report = attack(tmp_path, listener, {"sandbox": "bwrap"})
    seen = report["attack"]
    assert seen["environ"] == "not found"
    assert seen["tcp"].startswith("refused")
    assert seen["signal"].startswith("refused")
    assert_untouched(report, tmp_path)
    assert report["warning"] is None and report["uncontained"] == []


def test_landlock_contains_what_it_can_and_the_warning_names_the_rest(
    tmp_path: Path, listener: int, require_sandbox: Callable[[str], None], attack: Callable[..., dict[str, Any]]
) -> None:
    require_sandbox("landlock")
    report = attack(tmp_path, listener, {"sandbox": "auto"}, no_bwrap=True)
    assert report["mode"] == "landlock"
    seen, abi = report["attack"], landlock.abi_version()
    assert seen["environ"] == "not found"  # /proc of other processes is out of reach
    assert_untouched(report, tmp_path)  # the run folder, the store, $HOME and the snapshot are read-only
    warning = report["warning"]
    assert "bubblewrap is not installed" in warning and "apt-get install bubblewrap" in warning
    if abi >= 4:
        assert seen["tcp"].startswith("refused")
        assert "UDP, raw and Unix-socket networking" in warning
    else:
        assert "the network" in warning
    if abi >= 6:
        assert seen["signal"].startswith("refused")
    else:
        assert "signals to other processes" in warning


def test_without_a_sandbox_the_warning_names_every_open_door(
    tmp_path: Path, listener: int, attack: Callable[..., dict[str, Any]]
) -> None:
    report = attack(tmp_path, listener, {"sandbox": "none"})
    seen = report["attack"]
    # what process isolation alone contains: the rollout's own environment is scrubbed, and the harness it ran on
    # was its own copy (the later result is unchanged, checked above), even though it could write the snapshot
    assert report["targets"][str(tmp_path / "run" / "snapshot" / "policy.txt")].endswith(b"planted by a rollout")
    for door in ("/proc/<pid>/environ", "the network", "$HOME, the run folder, evodag.sqlite", "signals", "SysV IPC"):
        assert door in report["warning"]
    # and the warning is not crying wolf: these did get through
    assert seen["environ"] == "found" and seen["tcp"] == "connected" and seen["signal"] == "sent"


def test_the_default_is_the_strongest_sandbox_available(
    tmp_path: Path,
    listener: int,
    sandbox_unavailable: Callable[[str], str | None],
    attack: Callable[..., dict[str, Any]],
) -> None:
    assert ExecutorConfig().sandbox == "auto"
    report = attack(tmp_path, listener, {})
    expected = next(mode for mode in ("bwrap", "landlock", "none") if not sandbox_unavailable(mode))
    assert report["mode"] == expected
    if expected != "none":
        assert report["attack"]["environ"] == "not found"
        assert_untouched(report, tmp_path)


@pytest.mark.parametrize("mode", ["bwrap", "landlock", "none"])
def test_nothing_one_rollout_writes_reaches_the_next(
    tmp_path: Path,
    mode: str,
    make_harness: Callable[..., Path],
    make_job: Callable[..., Any],
    require_sandbox: Callable[[str], None],
    run_optimizer: Callable[..., dict[str, Any]],
) -> None:
    require_sandbox(mode)
    token = str(random.Random(str(tmp_path)).randrange(10**8, 10**9))
    harness, traces = make_harness(tmp_path / "snapshot"), tmp_path / "traces"
    prompt = json.dumps({"token": token})
    jobs = [make_job(harness, traces, "leave-1", prompt=prompt), make_job(harness, traces, "look-1", prompt=prompt)]
    try:
        report = run_optimizer(tmp_path, {"sandbox": mode}, jobs)
        left = json.loads((traces / "leave.json").read_text())
        seen = json.loads((traces / "look.json").read_text())
    finally:
        for stray in (Path("/tmp") / f"saddler-mark-{token}", Path("/dev/shm") / f"saddler-mark-{token}"):
            stray.unlink(missing_ok=True)
        libc = ctypes.CDLL(None, use_errno=True)
        segment = libc.shmget(sysv_key(token), 0, 0)
        if segment >= 0:
            libc.shmctl(segment, 0, None)
    assert left["harness"] == left["home"] == left["cwd"] == "written"  # its own copy and HOME are writable ...
    assert not (harness / f"mark-{token}").exists()  # ... and private
    assert not seen["harness"] and not seen["home"] and not seen["cwd"]
    if mode == "none":
        shared = [place for place in ("tmp", "shm", "sysv") if seen[place]]
        assert shared == ["tmp", "shm", "sysv"]  # not contained, and the warning says so
        assert "writes outside the rollout's private folder" in report["warning"] and "SysV IPC" in report["warning"]
    elif mode == "landlock":
        assert left["tmp"].startswith("refused") and left["shm"].startswith("refused")
        assert not seen["tmp"] and not seen["shm"]
        assert seen["sysv"] == (left["sysv"] == "written") and "SysV IPC" in report["warning"]
    else:
        assert not any(seen.values())


def test_an_explicit_sandbox_that_is_missing_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "bwrap_status", lambda: (False, "bubblewrap is not installed"))
    with pytest.raises(ExecutorError) as err:
        resolve_sandbox(ExecutorConfig(sandbox="bwrap"))
    assert "bubblewrap is not installed" in str(err.value) and "apt-get install bubblewrap" in str(err.value)
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    with pytest.raises(ExecutorError, match="no Landlock"):
        resolve_sandbox(ExecutorConfig(sandbox="landlock"))
    fallback = resolve_sandbox(ExecutorConfig())
    assert fallback.mode == "none" and "no Landlock on this kernel" in fallback.describe()
    assert fallback.warning() is not None and "/proc/<pid>/environ" in fallback.warning()


def test_a_tree_is_copied_from_memory_so_a_later_plant_changes_nothing(
    tmp_path: Path, make_harness: Callable[..., Path]
) -> None:
    from saddler.executor.workspace import HarnessCopies

    source = make_harness(tmp_path / "snapshot", "first")
    copies = HarnessCopies()
    copies.copy(source, "tree-a", tmp_path / "c1")
    (source / "policy.txt").write_text("planted")
    (source / "extra.py").write_text("x = 1")
    copies.copy(source, "tree-a", tmp_path / "c2")
    assert (tmp_path / "c2" / "policy.txt").read_text() == "first"
    assert not (tmp_path / "c2" / "extra.py").exists()


def test_a_tree_too_big_to_keep_is_read_once_then_copied_from_its_snapshot(
    tmp_path: Path, make_harness: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from saddler.executor import workspace

    reads: list[Path] = []
    read_tree = workspace.read_tree
    monkeypatch.setattr(workspace, "read_tree", lambda root: reads.append(root) or read_tree(root))
    source = make_harness(tmp_path / "snapshot", "first")
    copies = workspace.HarnessCopies(max_bytes=1)
    copies.copy(source, "tree-a", tmp_path / "c1")
    (source / "policy.txt").write_text("planted")
    copies.copy(source, "tree-a", tmp_path / "c2")
    assert reads == [source]
    assert (tmp_path / "c1" / "policy.txt").read_text() == "first"
    assert (tmp_path / "c2" / "policy.txt").read_text() == "planted"

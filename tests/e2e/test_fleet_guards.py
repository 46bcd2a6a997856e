"""What a fleet must never lose or let slip (the 002 seed's fixed eval, git-untracked results.tsv, and agents
that end with the orchestrator): results rows survive every `git reset --hard` whatever the file is called,
an agent's edit of the eval harness is a crash row and never kept, `kill -9` of the orchestrator leaves no
agent or tool process, the resumed run resets the half-done experiment and logs it as a crash, and `fleet
kill` returns only once the run can be started again."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from gitrepo import git, init_commit
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.modes.fleet.config import FleetPaths
from saddler.modes.fleet.loop import FleetRun, init_fleet
from saddler.modes.fleet.results import read_results

pytestmark = pytest.mark.slow


def test_a_custom_results_file_keeps_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"problem.results_file": "experiments.tsv", "stop_when.max_iterations": 4})
    work = tmp_path / "my-project"
    init_fleet(tmp_path / "root", fleet_json)
    FleetRun(tmp_path / "root").run()
    rows = read_results(work / "experiments.tsv")
    assert [r.status for r in rows] == ["keep", "keep", "discard", "crash", "discard"]
    assert "experiments.tsv" not in git(work, "ls-files").split()
    assert git(work, "check-ignore", "experiments.tsv") == "experiments.tsv"
    assert "experiments.tsv" not in git(work, "log", "--all", "--name-only", "--format=")


def test_a_tracked_results_file_is_untracked_at_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"stop_when.max_iterations": 2})
    work = tmp_path / "my-project"
    earlier = "commit\tmetric\tstatus\tdescription\nabc1234\t120.000000\tkeep\tan earlier session's baseline\n"
    (work / "results.tsv").write_text(earlier, encoding="utf-8")
    init_commit(work, "x")
    paths = init_fleet(tmp_path / "root", fleet_json)
    assert "results.tsv" not in git(work, "ls-files").split()
    assert (
        git(work, "log", "-1", "--format=%s") == "fleet: stop tracking results.tsv (the fleet's log stays out of git)"
    )
    FleetRun(paths.root).run()  # iteration 2 is discarded: git reset --hard
    rows = read_results(work / "results.tsv")
    assert [r.description for r in rows] == [
        "an earlier session's baseline",
        "baseline",
        "OPT_LEVEL 0 -> 1",
        "SLOWDOWN 0 -> 1",
    ]


def test_the_eval_harness_is_immutable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"stop_when.max_iterations": 3})
    work, root = tmp_path / "my-project", tmp_path / "root"
    res = CliRunner().invoke(app, ["fleet", "init", str(root), "--from-fleet", str(fleet_json), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["protected"] == ["Makefile", "bench.py"]  # the eval command's files
    harness = (work / "bench.py").read_bytes()
    monkeypatch.setenv("FAKE_FLEET_TAMPER", "2")
    FleetRun(root).run()
    rows = read_results(work / "results.tsv")
    assert [(r.status, r.description) for r in rows] == [
        ("keep", "baseline"),
        ("keep", "OPT_LEVEL 0 -> 1"),
        ("crash", "protected path changed: bench.py (faster p99 (measured by a simpler bench))"),
        ("crash", "rewrite the hot loop"),
    ]
    assert (work / "bench.py").read_bytes() == harness
    assert "bench.py" not in git(work, "log", "--name-only", "--format=", "HEAD~1..HEAD")
    assert "bench.py" not in git(
        work, "log", "--name-only", "--format=", f"{git(work, 'rev-list', '--max-parents=0', 'HEAD')}..HEAD"
    )
    with EvoDAG(root / "evodag.sqlite", readonly=True) as store:
        node = next(n for n in store.nodes() if n.iteration == 2)
        assert node.status == "invalid" and node.status_reason.startswith("protected path changed: bench.py")
        assert not store.rollouts(node_id=node.id)  # never evaluated by the edited harness
    # protected paths can be named in fleet.json instead
    data = json.loads(fleet_json.read_text())
    data["problem"]["protected"] = ["solution.py"]
    fleet_json.write_text(json.dumps(data))
    assert FleetPaths.open(init_fleet(tmp_path / "root2", fleet_json).root).protected == ["solution.py"]


def _tagged(root: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if f"SADDLER_FLEET_ROOT={root}".encode() in environ.split(b"\0") and state not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


def test_kill_9_of_the_orchestrator_leaves_no_agent_and_resumes_cleanly(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fleet_setup: Callable[..., Path],
    wait_until: Callable[..., bool],
) -> None:
    root, work = tmp_path / "root", tmp_path / "my-project"
    init_fleet(root, fleet_setup(**{"stop_when.max_iterations": 3}))
    env = {**os.environ, "FAKE_FLEET_HANG": "2"}
    orchestrator = subprocess.Popen(
        [sys.executable, "-c", "from saddler.cli.app import app; app()", "fleet", "run", str(root)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    paths = FleetPaths.open(root)
    try:
        assert wait_until(
            lambda: paths.session_log(2).is_file() and "thinking hard" in paths.session_log(2).read_text()
        )
        assert "HALF_DONE" in (work / "solution.py").read_text()  # the agent's unfinished edit
        os.kill(orchestrator.pid, signal.SIGKILL)
        orchestrator.wait()
        assert wait_until(lambda: not _tagged(root)), f"survivors of the orchestrator: {_tagged(root)}"
    finally:
        for pid in _tagged(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    state = FleetRun(root).run()
    assert state["termination_reason"] == "max_iterations"
    rows = read_results(work / "results.tsv")
    assert [(r.status, r.description) for r in rows] == [
        ("keep", "baseline"),
        ("keep", "OPT_LEVEL 0 -> 1"),
        ("crash", "interrupted experiment 2 (its unfinished changes were reset)"),
        ("crash", "rewrite the hot loop"),
    ]
    time.sleep(5)  # the tool's late edit would have landed by now
    text = (work / "solution.py").read_text()
    assert "HALF_DONE" not in text and "LATE_EDIT" not in text and git(work, "status", "--porcelain") == ""
    assert "LATE_EDIT" not in git(work, "log", "-p", "--all")


FAKE_ORCHESTRATOR = textwrap.dedent(
    """
    import fcntl, os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # slow to die: it is still writing
    fd = os.open(sys.argv[1] + "/.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    open(sys.argv[1] + "/.orch.pid", "w").write(str(os.getpid()))
    time.sleep(300)
    """
)


def test_fleet_kill_returns_once_the_run_can_start_again(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fleet_setup: Callable[..., Path],
    wait_until: Callable[..., bool],
) -> None:
    paths = init_fleet(tmp_path / "root", fleet_setup())
    holder = subprocess.Popen([sys.executable, "-c", FAKE_ORCHESTRATOR, str(paths.root)], start_new_session=True)
    try:
        assert wait_until(paths.pid.exists)
        res = CliRunner().invoke(app, ["fleet", "kill", str(paths.root)])
        assert res.exit_code == 0 and holder.pid in json.loads(res.output)["killed"]
        fd = os.open(paths.root / ".lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError before: the lock was still held
        finally:
            os.close(fd)
    finally:
        holder.kill()
        holder.wait()


def test_default_protected_paths_come_from_the_eval_command(tmp_path: Path) -> None:
    from saddler.modes.fleet.protect import eval_files, protected_changes

    for name in ("eval.py", "bench.sh", "saddler_bench.py", "package.json", "conftest.py", "test_speed.py"):
        (tmp_path / name).write_text("{}\n" if name.endswith(".json") else "# x\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "Makefile").write_text("build:\n\tcc x.c\nbenchmark: build\n\t@python3 eval.py --fast\n")
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"bench": "bash bench.sh", "test": "jest"}}))
    assert eval_files("python3 eval.py", tmp_path) == ["eval.py"]
    assert eval_files("bash bench.sh && echo done", tmp_path) == ["bench.sh"]
    assert eval_files("python3 saddler_bench.py", tmp_path) == ["saddler_bench.py"]
    assert eval_files("make benchmark", tmp_path) == ["Makefile", "eval.py"]
    assert eval_files("yarn bench", tmp_path) == ["bench.sh", "package.json"]
    assert eval_files("npm run bench", tmp_path) == ["bench.sh", "package.json"]
    assert eval_files("pytest --tb=short", tmp_path) == ["conftest.py", "test_*.py", "tests/"]
    assert eval_files("pytest tests/", tmp_path) == ["tests/"]
    changed = ["eval.py", "src/solver.py", "tests/test_a.py", "test_speed.py"]
    assert protected_changes(changed, ["eval.py", "tests/", "test_*.py"]) == [
        "eval.py",
        "tests/test_a.py",
        "test_speed.py",
    ]

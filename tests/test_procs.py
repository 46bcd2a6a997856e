"""`saddler.procs.run_process_group`, the one runner of external commands: a command's whole process tree dies
with the process that ran it, even the parts that left its session (CLI agents start tool subprocesses with
`setsid`), and nothing of the tree outlives the command or a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from saddler.procs import run_process_group

MARK = "SADDLER_TEST_TREE"
# A command whose tree leaves its session and process group: a plain background child, a `setsid` child, and
# a double-forked grandchild in a new session; it writes a file once all three are running, then waits.
TREE = textwrap.dedent(
    """
    import os, subprocess, sys, time
    subprocess.Popen(["sleep", "300"])
    subprocess.Popen(["sleep", "300"], start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(300)
        os._exit(0)
    open(sys.argv[1], "w").close()
    time.sleep(300)
    """
)


def _marked(mark: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries `mark`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if f"{MARK}={mark}".encode() in environ and state not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


def _sweep(mark: str) -> None:
    for pid in _marked(mark):
        with __import__("contextlib").suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_the_whole_tree_dies_when_the_caller_is_killed(tmp_path: Path, wait_until: Callable[..., bool]) -> None:
    mark = uuid.uuid4().hex
    ready = tmp_path / "ready"
    (tmp_path / "tree.py").write_text(TREE, encoding="utf-8")
    caller = textwrap.dedent(
        f"""
        from saddler.procs import run_process_group
        run_process_group([{sys.executable!r}, "tree.py", {str(ready)!r}], cwd={str(tmp_path)!r}, timeout_s=600)
        """
    )
    env = {**os.environ, MARK: mark}
    proc = subprocess.Popen([sys.executable, "-c", caller], env=env, cwd=tmp_path, start_new_session=True)
    try:
        assert wait_until(ready.exists), "the command never started its tree"
        assert len(_marked(mark)) >= 5  # caller, supervisor, tree.py, 2 sleeps, the double-forked one
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert wait_until(lambda: not _marked(mark)), f"survivors: {_marked(mark)}"
    finally:
        proc.kill()
        _sweep(mark)


def test_nothing_outlives_the_command_or_its_timeout(tmp_path: Path, wait_until: Callable[..., bool]) -> None:
    mark = uuid.uuid4().hex
    env = {**os.environ, MARK: mark}
    (tmp_path / "tree.py").write_text(TREE, encoding="utf-8")
    try:
        quick = run_process_group(
            ["sh", "-c", "setsid sleep 300 & echo started; exit 3"], cwd=tmp_path, env=env, timeout_s=60
        )
        assert (quick.returncode, quick.stdout, quick.timed_out) == (3, "started\n", False)
        assert wait_until(lambda: not _marked(mark)), f"survivors after exit: {_marked(mark)}"
        slow = run_process_group(
            [sys.executable, "tree.py", str(tmp_path / "ready")], cwd=tmp_path, env=env, timeout_s=3
        )
        assert slow.timed_out and slow.returncode is None
        assert wait_until(lambda: not _marked(mark)), f"survivors after the timeout: {_marked(mark)}"
    finally:
        _sweep(mark)


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["sh", "-c", "exit 7"], 7), (["sh", "-c", "kill -TERM $$"], -signal.SIGTERM), (["true"], 0)],
)
def test_exit_status_and_io_pass_through(tmp_path: Path, argv: list[str], code: int) -> None:
    run = run_process_group(argv, cwd=tmp_path, timeout_s=60)
    assert run.returncode == code and not run.timed_out
    echoed = run_process_group(["cat"], cwd=tmp_path, timeout_s=60, stdin_text="a\nb\n")
    assert echoed.stdout == "a\nb\n" and echoed.returncode == 0
    missing = run_process_group(["no-such-program-xyz"], cwd=tmp_path, timeout_s=60)
    assert missing.returncode == 127 and "cannot run 'no-such-program-xyz'" in missing.stderr


def test_processes_are_found_by_an_exact_environment_entry(tmp_path: Path) -> None:
    """`pids_with_env` (how the rollout reaper and `fleet kill` find what escaped its tree) matches a whole
    `NAME=value` entry: neither a longer name ending in NAME nor a longer value is taken for it."""
    from saddler.executor.environment import MARKER_VAR
    from saddler.executor.reaper import marked_pids
    from saddler.procs import pids_with_env, read_pid

    base = {"PATH": os.environ["PATH"]}
    tagged = subprocess.Popen(["sleep", "30"], env={**base, "SADDLER_T": "a"})
    suffix = subprocess.Popen(["sleep", "30"], env={**base, f"X{MARKER_VAR}": "m1", "XSADDLER_T": "a"})
    try:
        assert pids_with_env("SADDLER_T=a") == [tagged.pid]
        assert pids_with_env("SADDLER_T=") == [] and marked_pids("m1") == []
    finally:
        for proc in (tagged, suffix):
            proc.kill()
            proc.wait()
    (tmp_path / "pid").write_text(" 42\n")
    (tmp_path / "bad").write_text("x")
    assert (read_pid(tmp_path / "pid"), read_pid(tmp_path / "bad"), read_pid(tmp_path / "none")) == (42, None, None)

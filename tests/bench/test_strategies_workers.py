"""The strategies bench's worker processes end with the sweep that started them, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from repo_paths import REPO


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie nobody reaps has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _workers(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"multiprocessing-fork" in cmdline:
            found.append(int(entry.name))
    return found


def test_a_killed_sweep_leaves_no_worker_running(tmp_path: Path) -> None:
    sweep = subprocess.Popen(
        [sys.executable, "bench/strategies.py", "--benchmarks", "opsdesk", "--proposers", "neutral", "--seeds", "3",
         "--iterations", "30", "--only", "full", "--jobs", "1", "--out", str(tmp_path / "out")],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while not workers and time.monotonic() < deadline and sweep.poll() is None:
            workers = _workers(sweep.pid)
            time.sleep(0.1)
        assert workers, "the sweep started no worker process"
        while not (tmp_path / "out" / "opsdesk" / "neutral" / "full-s0").exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # the worker is inside a run, which takes longer than the wait below
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait()
        gone_by = time.monotonic() + 4
        while any(_alive(w) for w in workers) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not [w for w in workers if _alive(w)], "a worker outlived the sweep that started it"
    finally:
        sweep.kill()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)

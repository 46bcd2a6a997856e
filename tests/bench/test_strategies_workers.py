"""The strategies bench's worker processes end with the sweep that started them, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from repo_paths import REPO

from saddler.procs import descendants, is_running


def test_a_killed_sweep_leaves_no_worker_running(tmp_path: Path) -> None:
    sweep = subprocess.Popen(
        [sys.executable, "bench/strategies.py", "--benchmarks", "opsdesk", "--proposers", "neutral", "--seeds", "3",
         "--iterations", "30", "--only", "full", "--jobs", "1", "--out", str(tmp_path / "out")],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "out" / "opsdesk" / "neutral" / "full-s0").exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # a worker is inside a run, which takes longer than the wait below
        workers = descendants(sweep.pid)
        assert workers, "the sweep started no worker process"
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait()
        gone_by = time.monotonic() + 4
        while any(is_running(w) for w in workers) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not [w for w in workers if is_running(w)], "a worker outlived the sweep that started it"
    finally:
        sweep.kill()
        for w in workers:
            if is_running(w):
                os.kill(w, signal.SIGKILL)

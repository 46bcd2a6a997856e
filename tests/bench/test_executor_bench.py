"""bench/executor.py runs end to end (tiny size) and prints every figure it promises."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from repo_paths import REPO


def test_bench_prints_its_figures(tmp_path: Path, tests_dir: str, make_harness: Callable[..., Path]) -> None:
    harness = make_harness(tmp_path / "h")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests_dir, str(REPO)])}
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "executor.py"), "--benchmark", "fake_benchmarks:FakeBenchmark",
         "--harness", str(harness), "--rollouts", "8", "--trials", "1"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert figures["executor_rollouts"] == "8"
    assert figures["executor_results_match"] == "true"
    for key in ("executor_speedup_2w", "executor_overhead_ms", "executor_rps_1w", "executor_rps_2w"):
        assert re.fullmatch(r"-?\d+\.\d+", figures[key]), (key, figures[key])
    assert float(figures["executor_rps_2w"]) > 0
    sandboxes = figures["executor_sandboxes"].split(",")
    assert "none" in sandboxes and figures["executor_sandbox_default"] in sandboxes
    for box in sandboxes:  # the cost of each isolation stays visible
        assert re.fullmatch(r"-?\d+\.\d+", figures[f"executor_overhead_ms_{box}"]), box

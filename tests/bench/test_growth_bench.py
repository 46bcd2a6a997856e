"""bench/growth.py measures what a session is given to read on a synthetic DAG (its `--skip-run` half): it runs on
today's modules and prints its grep-able figures."""

from __future__ import annotations

import subprocess
import sys

import pytest
from repo_paths import REPO

pytestmark = pytest.mark.slow  # builds DAGs of up to 10,000 nodes: about 20 s


def test_the_session_input_half_of_the_growth_bench_runs_and_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, "bench/growth.py", "--skip-run", "--nodes", "120"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-2000:]
    names = {line.split(":")[0] for line in done.stdout.splitlines() if ":" in line}
    assert {
        "growth_session_input_bytes_max",
        "growth_diagnosis_input_bytes_10",
        "growth_evolution_input_bytes_10",
    } <= names

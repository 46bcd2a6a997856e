"""A real (short) strategies sweep with `--record`, reported again from its records with `--from`: the same lines,
and the record carries the fingerprint of the code that ran it (bench/strategies.py, bench/strategy_records.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPO

sys.path.insert(0, str(REPO / "bench"))
import strategy_records

pytestmark = pytest.mark.slow
SWEEP = ["--benchmarks", "opsdesk", "--proposers", "neutral", "--only", "full,epoch_sampler", "--iterations", "2"]


def _bench(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "bench/strategies.py", *SWEEP, *args], cwd=REPO, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return [line for line in done.stdout.splitlines() if not line.startswith("# ")]


def test_a_recorded_sweep_reports_the_same_from_its_records(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    live = _bench("--seeds", "2", "--jobs", "1", "--out", str(tmp_path / "runs"), "--record", str(records))
    assert _bench("--from", str(records), "--seeds", "2") == live  # the sweep asked is the one that ran
    recorded = strategy_records.load([records])
    assert sorted(r.key for r in recorded) == [(c, n, s) for c in ["opsdesk.neutral"]
                                               for n in ["epoch_sampler", "full"] for s in (0, 1)]  # fmt: skip
    assert {r.fingerprint for r in recorded} == {strategy_records.fingerprint()}
    for name in (
        "strategy_epoch_sampler_minus_full_test",
        "strategy_full_within_2pts_of_dag_best_unminimized",
        "strategy_full_dag_best_is_kept_share",
        "strategy_full_llm_sessions",
        "check_false_accept_share",
    ):
        assert any(line.startswith(f"opsdesk.neutral.{name}: ") for line in live), name
    assert all(r.result.sessions and r.result.proposals == 2 for r in recorded)  # 2 iterations: one proposal each
    lines = records.read_text()
    again = subprocess.run([sys.executable, "bench/strategies.py", *SWEEP, "--seeds", "2", "--jobs", "1", "--reuse",
                            "--out", str(tmp_path / "runs"), "--record", str(records)],
                           cwd=REPO, capture_output=True, text=True, check=True)  # fmt: skip
    assert records.read_text() == lines  # the re-measured runs are the recorded ones: no line added
    assert again.stdout.count(", already recorded)") == 4

"""bench/strategy_compare.py: one strategy of two records files (two code versions: an experiment and the default,
or the default before and after a change) compared seed by seed, the way docs/strategies.md states experiments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPO
from seed_results import seed_result

sys.path.insert(0, str(REPO / "bench"))
import strategy_compare
import strategy_records
import strategy_table

SCRIPT = REPO / "bench" / "strategy_compare.py"


def _file(path: Path, fingerprint: str, figures: list[tuple[int, float, dict[str, object]]]) -> Path:
    for seed, test, changes in figures:
        overrides = strategy_table.overrides_of("full", "neutral")
        result = seed_result(seed, test, **changes)  # type: ignore[arg-type]
        strategy_records.append(
            path, strategy_records.Record(fingerprint, "repofix.neutral", "full", overrides, 30, result)
        )
    return path


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    base = _file(tmp_path / "base.jsonl", "a" * 16, [
        (0, 0.50, {"spent": 1000, "sessions": 80, "dag_best_test": 0.60, "accepted": 4, "false_accepts": 1}),
        (1, 0.70, {"spent": 1200, "sessions": 90, "accepted": 4}),
        (2, 0.60, {"spent": 1100, "sessions": 85, "accepted": 2}),
    ])  # fmt: skip
    candidate = _file(tmp_path / "cand.jsonl", "b" * 16, [
        (0, 0.60, {"spent": 1100, "sessions": 80, "accepted": 5}),
        (1, 0.70, {"spent": 1300, "sessions": 90, "accepted": 5}),
        (2, 0.55, {"spent": 1200, "sessions": 88, "accepted": 3, "false_accepts": 1}),
        (3, 0.90, {"spent": 1200, "sessions": 88}),  # no base seed: left out of every figure
    ])  # fmt: skip
    return base, candidate


def test_the_lines_pair_the_seeds_both_files_hold(tmp_path: Path) -> None:
    base, candidate = _pair(tmp_path)
    lines = strategy_compare.compare_lines(base, candidate, "full")
    assert lines == [
        "repofix.neutral.compare_seeds: 3",
        "repofix.neutral.compare_test: 0.6000 -> 0.6167",
        "repofix.neutral.compare_minus_base_test: +0.0167 ± 0.0441  (1 better, 1 worse)",
        "repofix.neutral.compare_within_2pts_of_dag_best: 0.67 -> 1.00",
        "repofix.neutral.compare_false_accept_share: 0.100 -> 0.077  (1 of 10 -> 1 of 13)",
        "repofix.neutral.compare_rollouts_spent: 1100 -> 1200  (+9.1 %)",
        "repofix.neutral.compare_llm_sessions: 85.0 -> 86.0",
        "repofix.neutral.compare_moved: 0 +0.100, 2 -0.050",
    ]


def test_the_command_prints_the_lines_and_refuses_files_without_a_common_seed(tmp_path: Path) -> None:
    base, candidate = _pair(tmp_path)
    done = subprocess.run([sys.executable, str(SCRIPT), "--base", str(base), "--candidate", str(candidate)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.splitlines()[0] == "repofix.neutral.compare_seeds: 3"
    alone = _file(tmp_path / "alone.jsonl", "c" * 16, [(7, 0.5, {})])
    with pytest.raises(strategy_records.RecordsError, match="no cell where both files hold full on a common seed"):
        strategy_compare.compare_lines(base, alone, "full")
    refused = subprocess.run([sys.executable, str(SCRIPT), "--base", str(base), "--candidate", str(alone)],
                             capture_output=True, text=True)  # fmt: skip
    assert refused.returncode == 2 and "no cell where both files hold full" in refused.stderr

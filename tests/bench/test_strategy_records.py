"""The strategies bench in shards: each run's figures recorded as a JSON line with the fingerprint of the code that
made it, and one report over several shards that refuses records of other code, other strategy definitions or
conflicting figures of the same run (bench/strategy_records.py, `bench/strategies.py --record/--from`)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from repo_paths import REPO
from seed_results import seed_result

sys.path.insert(0, str(REPO / "bench"))
import strategy_records
import strategy_table
from strategy_records import Record, RecordsError

CELL = "opsdesk.neutral"


def _record(name: str, seed: int, test: float, print_: str = "f" * 16, cell: str = CELL, **changes: object) -> Record:
    return Record(
        print_,
        cell,
        name,
        strategy_table.overrides_of(name, cell.split(".")[1]),
        30,
        seed_result(seed, test, **changes),
    )


def _write(path: Path, records: list[Record]) -> Path:
    for record in records:
        strategy_records.append(path, record)
    return path


@settings(deadline=None)  # a round trip has no time contract; a loaded CI machine must not fail it
@given(
    seed=st.integers(0, 10_000),
    test=st.floats(0, 1, allow_nan=False),
    origins=st.lists(st.tuples(st.text(max_size=8), st.sampled_from(["capability", "steering"])), max_size=3),
    notes=st.lists(st.text(max_size=12), max_size=2),
)
def test_a_record_round_trips_through_its_json_line(seed: int, test: float, origins: list, notes: list) -> None:
    record = _record("full", seed, test, origins=origins, notes=notes)
    assert Record.from_json(record.to_json()) == record


def test_shards_report_as_one_sweep_paired_over_every_seed(tmp_path: Path) -> None:
    first = [_record("full", 0, 0.9), _record("full", 1, 0.8), _record("strict_mean", 0, 0.7)]
    shard_a = _write(tmp_path / "a.jsonl", [*first, _record("strict_mean", 1, 0.8)])
    shard_b = _write(tmp_path / "b.jsonl", [_record("full", 2, 0.9), _record("strict_mean", 2, 0.6)])
    done = subprocess.run(
        [sys.executable, "bench/strategies.py", "--from", str(shard_a), "--from", str(shard_b),
         "--benchmarks", "opsdesk", "--proposers", "neutral"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    p = "opsdesk.neutral"
    assert lines[0] == "# cell opsdesk.neutral: 3 seed(s) 0-2"
    assert f"{p}.strategy_full_seeds: 3" in lines
    assert f"{p}.strategy_full_test: 0.8667" in lines
    assert f"{p}.strategy_strict_mean_minus_full_test: -0.1667  (± 0.0882 s.e., 3 seeds: better 0, worse 2)" in lines
    assert f"{p}.check_strict_mean: pass  (-0.1667 ± 0.0882: higher by less than one s.e. is allowed)" in lines


def test_a_run_recorded_twice_counts_once_and_conflicting_figures_are_a_determinism_defect(tmp_path: Path) -> None:
    same = tmp_path / "same.jsonl"  # two shards concatenated by hand: the loader, not append, sees both lines
    same.write_text(_record("full", 0, 0.9).to_json() + "\n" + _record("full", 0, 0.9, wall_s=99.0).to_json() + "\n")
    assert [r.result.seed for r in strategy_records.load([same])] == [0]
    other = _write(tmp_path / "other.jsonl", [_record("full", 0, 0.8)])
    with pytest.raises(RecordsError, match="recorded before with other figures"):
        strategy_records.load([same, other])


def test_a_rerun_of_a_recorded_run_adds_no_line_and_other_figures_stop_the_sweep(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    assert strategy_records.append(path, _record("full", 0, 0.9)) is True
    assert strategy_records.append(path, _record("full", 0, 0.9, wall_s=99.0)) is False  # --reuse re-measured it
    assert strategy_records.append(path, _record("full", 1, 0.9)) is True
    assert strategy_records.append(path, _record("full", 0, 0.9, cell="repofix.neutral")) is True
    assert len(path.read_text().splitlines()) == 3
    with pytest.raises(RecordsError, match="recorded before with other figures"):
        strategy_records.append(path, _record("full", 0, 0.8))
    assert len(path.read_text().splitlines()) == 3


def test_records_of_other_code_or_other_strategy_definitions_are_not_mixed(tmp_path: Path) -> None:
    mixed = [_record("full", 0, 0.9), _record("full", 1, 0.9, print_="0" * 16)]
    with pytest.raises(RecordsError, match="2 versions of the code"):
        strategy_records.check_combinable(mixed, strategy_table.STRATEGIES, 30)
    redefined = dataclasses.replace(_record("strict_mean", 0, 0.9), overrides={"policies": {"acceptance": "x"}})
    with pytest.raises(RecordsError, match="rerun its shards"):
        strategy_records.check_combinable([redefined], strategy_table.STRATEGIES, 30)
    with pytest.raises(RecordsError, match="ran 30 iterations, not 60"):
        strategy_records.check_combinable([_record("full", 0, 0.9)], strategy_table.STRATEGIES, 60)


def test_the_report_refuses_a_missing_file_and_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "bench/strategies.py", "--from", str(tmp_path / "none.jsonl")],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no such records file" in done.stderr


def test_the_fingerprint_follows_every_byte_of_the_code_and_nothing_else(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    first = strategy_records.code_digest([pkg], [])
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert strategy_records.code_digest([pkg], []) == first
    (pkg / "a.py").write_text("x = 2\n")
    assert strategy_records.code_digest([pkg], []) != first
    assert strategy_records.fingerprint() == strategy_records.fingerprint()


def test_missing_lists_the_seeds_each_strategy_of_each_cell_lacks() -> None:
    records = [_record("full", 0, 0.9), _record("full", 1, 0.9), _record("strict_mean", 1, 0.8)]
    got = strategy_records.missing(records, [CELL, "repofix.neutral"], ["full", "strict_mean"], range(3))
    assert got == {
        (CELL, "full"): [2],
        (CELL, "strict_mean"): [0, 2],
        ("repofix.neutral", "full"): [0, 1, 2],
        ("repofix.neutral", "strict_mean"): [0, 1, 2],
    }


def test_todo_prints_what_is_missing_and_the_shard_commands_that_record_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", [_record("full", s, 0.9) for s in range(4)] + [_record("gepa", 0, 0.8)])
    done = subprocess.run(
        [sys.executable, "bench/strategies.py", "--from", str(path), "--todo", "--benchmarks", "opsdesk",
         "--proposers", "neutral", "--only", "full,strict_mean,gepa", "--seeds", "4"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "todo opsdesk.neutral strict_mean: seeds 0-3" in lines
    assert "todo opsdesk.neutral gepa: seeds 1-3" in lines
    assert "todo_runs: 7  (of 12 asked)" in lines
    commands = [line for line in lines if line.startswith("todo_command: ")]
    # one shard per cell and seed span; GEPA's budget is the default's run of the same seed, so `full` goes with it
    assert commands == [
        f"todo_command: python bench/strategies.py --benchmarks opsdesk --proposers neutral --first-seed 0 --seeds 1 "
        f"--only strict_mean --jobs 2 --reuse --out DIR --record {path}",
        f"todo_command: python bench/strategies.py --benchmarks opsdesk --proposers neutral --first-seed 1 --seeds 3 "
        f"--only full,strict_mean,gepa --jobs 2 --reuse --out DIR --record {path}",
    ]
    assert any(line.startswith("todo_fingerprint: ffffffffffffffff") for line in lines)

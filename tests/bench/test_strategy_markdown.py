"""`bench/strategies.py --markdown`: the docs' tables written from the figures, never by hand."""

from __future__ import annotations

import subprocess
import sys

from repo_paths import REPO
from seed_results import seed_result

sys.path.insert(0, str(REPO / "bench"))
import strategy_markdown


def _results() -> dict[str, dict[str, list[strategy_markdown.SeedResult]]]:
    full = [
        seed_result(0, 0.70, spent=1200, evidence_rollouts=200, sessions=80, proposals=30),
        seed_result(1, 0.60, spent=1300, evidence_rollouts=300, sessions=90, proposals=30, false_accepts=1),
    ]
    worse = [
        seed_result(0, 0.60, spent=1000, evidence_rollouts=0, ties_rejected=3),
        seed_result(1, 0.55, spent=1100, evidence_rollouts=0, dag_best_test=0.60),
    ]
    gepa = [seed_result(0, 0.65, spent=1190, accepted=0, rejected=0), seed_result(1, 0.62, spent=1290)]
    return {"repofix.calibrated": {"full": full, "strict_mean": worse, "gepa": gepa}}  # fmt: skip


def test_a_cell_table_has_every_strategy_with_the_docs_columns() -> None:
    lines = strategy_markdown.cell_table("repofix.calibrated", _results()["repofix.calibrated"])
    assert lines[0] == (
        "| strategy | test (± std) | minus full (paired) | search rollouts (evidence) | LLM sessions (proposals) | "
        "ties rejected on the batch alone | false accepts | within 2 pts of the DAG's best | of the best kept node |"
    )
    assert lines[2] == (
        "| full (the default) | 0.650 ± 0.050 | | 1,250 (250) | 85 (30) | 0.000 of 12 | 0.125 of 8 | 1.00 | 1.00 |"
    )
    assert lines[3] == (
        "| strict_mean | 0.575 ± 0.025 | −0.075 ± 0.025 (0 better, 2 worse) | 1,050 (0) | | 0.250 of 12 | 0.000 of 8 "
        "| 0.50 | 1.00 |"
    )
    # GEPA keeps no decisions of saddler's kind: its near-best figure is over its own pool
    assert (
        lines[4] == "| gepa | 0.635 ± 0.015 | −0.015 ± 0.035 (1 better, 1 worse) | 1,240 | | | | 1.00 of its pool | |"
    )


def test_the_summary_table_has_a_column_per_cell_and_bolds_a_variant_above_the_default() -> None:
    neutral = {"full": [seed_result(0, 0.9), seed_result(1, 0.8)],
               "strict_mean": [seed_result(0, 0.95), seed_result(1, 0.8)]}  # fmt: skip
    results = _results() | {"opsdesk.neutral": neutral}
    lines = strategy_markdown.summary_table(results)
    assert lines[:3] == [
        "| strategy | repofix, calibrated | opsdesk, neutral |",
        "|---|---|---|",
        "| full (the default) | 0.650 | 0.850 |",
    ]
    assert lines[3] == "| strict_mean | −0.075 ± 0.025 | **+0.025 ± 0.025** |"
    assert lines[4] == "| gepa | −0.015 ± 0.035 | |"


def test_markdown_from_records_prints_the_tables_instead_of_the_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import strategy_records
    import strategy_table

    path = tmp_path / "r.jsonl"
    for name, runs in _results()["repofix.calibrated"].items():
        for r in runs:
            overrides = strategy_table.overrides_of(name, "calibrated")
            strategy_records.append(
                path, strategy_records.Record("f" * 16, "repofix.calibrated", name, overrides, 30, r)
            )
    done = subprocess.run(
        [sys.executable, "bench/strategies.py", "--from", str(path), "--markdown"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| full (the default) | 0.650 ± 0.050 |" in done.stdout
    assert "repofix.calibrated.strategy_full_test" not in done.stdout


def test_a_strategy_measured_on_fewer_seeds_than_its_cell_says_so_in_both_tables() -> None:
    full = [seed_result(s, 0.8) for s in range(3)]
    partial = [seed_result(0, 0.6), seed_result(1, 0.7)]  # a sweep cut short: 2 of the cell's 3 seeds
    results = {"repofix.calibrated": {"full": full, "paper": partial}}
    cell = strategy_markdown.cell_table("repofix.calibrated", results["repofix.calibrated"])
    assert cell[3].startswith("| paper (2 of 3 seeds) | 0.650 ± 0.050 | −0.150 ± 0.050 (0 better, 2 worse) |")
    assert strategy_markdown.summary_table(results)[3] == "| paper | −0.150 ± 0.050 (2 of 3 seeds) |"


def test_a_strategy_measured_on_one_seed_shows_its_difference_without_a_standard_error() -> None:
    full = [seed_result(s, 0.8) for s in range(3)]
    results = {"repofix.calibrated": {"full": full, "greedy": [seed_result(0, 0.55)]}}  # a sweep stopped at one seed
    cell = strategy_markdown.cell_table("repofix.calibrated", results["repofix.calibrated"])
    assert cell[3].startswith(
        "| greedy (1 of 3 seeds) | 0.550 ± 0.000 | −0.250, one seed: no s.e. (0 better, 1 worse) |"
    )
    assert strategy_markdown.summary_table(results)[3] == "| greedy | −0.250, one seed: no s.e. (1 of 3 seeds) |"


def test_the_bars_table_has_the_defaults_bars_a_column_per_cell_as_the_check_lines_compute_them() -> None:
    results = _results() | {"opsdesk.neutral": {"full": [seed_result(0, 0.9), seed_result(1, 0.8)]}}
    lines = strategy_markdown.bars_table(results)
    assert lines == [
        "| bar | repofix, calibrated | opsdesk, neutral |",
        "|---|---|---|",
        "| ties rejected on the batch alone (≤ 0.25) | 0.000 of 12 | 0.000 of 12 |",
        "| false accepts (≤ 0.08) | 0.125 of 8 | 0.000 of 8 |",
        "| within 2 points of the DAG's best (≥ 0.90) | 1.00 | 1.00 |",
        "| within 2 points of the best kept node (proposed, ≥ 0.90) | 1.00 | 1.00 |",
        "| minus GEPA (≥ +0.05) | +0.015 | not run |",
        "| minus GEPA with saddler's phases (≥ 0) | not run | not run |",
        "| search rollouts | 1,250 | 600 |",
    ]


def test_the_bars_table_adds_what_dev_clearly_prefers_where_some_cell_measured_it() -> None:
    results = _results() | {
        "opsdesk.neutral": {
            "full": [seed_result(0, 0.9, dev_reachable_test=0.95), seed_result(1, 0.8, dev_reachable_test=0.8)]
        }
    }
    lines = strategy_markdown.bars_table(results)
    assert lines[6] == "| within 2 points of every node dev clearly prefers (proposed, ≥ 0.90) | not measured | 0.50 |"
    assert len(lines) == 10


def test_the_bars_table_adds_the_clear_false_accepts_where_some_cell_measured_them() -> None:
    results = _results() | {
        "opsdesk.neutral": {
            "full": [
                seed_result(0, 0.9, false_accepts=1, clear_false_accepts=1),
                seed_result(1, 0.8, clear_false_accepts=0),
            ]
        }
    }
    lines = strategy_markdown.bars_table(results)
    assert lines[4] == "| false accepts clearly lower on test (proposed, ≤ 0.08) | not measured | 0.125 |"
    assert len(lines) == 10


def test_a_gepa_bar_measured_on_fewer_seeds_than_its_cell_says_on_how_many() -> None:
    by_name = _results()["repofix.calibrated"]
    by_name["full"].append(seed_result(2, 0.7))
    lines = strategy_markdown.bars_table({"repofix.calibrated": by_name})
    assert lines[6] == "| minus GEPA (≥ +0.05) | +0.015 (2 of 3 seeds) |"

"""bench/gepa_headroom.py: the best harness on the sweep's own test seeds, and the share of GEPA's gap closed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from repo_paths import REPO
from seed_results import seed_result

sys.path.insert(0, str(REPO / "bench"))
import gepa_headroom
import strategy_runs
from strategy_records import Record


def test_the_proposed_bar_is_half_of_what_gepa_leaves_below_the_best_harness_capped_at_five_points() -> None:
    full = [seed_result(0, 0.98), seed_result(1, 0.96), seed_result(2, 0.50)]  # seed 2: no GEPA run, left out
    gepa = [seed_result(0, 0.94), seed_result(1, 0.95)]
    found = gepa_headroom.headroom("opsdesk.neutral", full, gepa, {0: 1.0, 1: 0.99, 2: 1.0})
    assert found is not None
    assert (found.seeds, found.lead, found.headroom, found.required) == (
        2, pytest.approx(0.025), pytest.approx(0.05), pytest.approx(0.025)
    )  # fmt: skip
    assert found.passes and found.share == pytest.approx(0.5)
    assert gepa_headroom.lines(found) == [
        "gepa_headroom opsdesk.neutral: best harness 0.995, GEPA 0.945, default 0.970 over 2 seeds: GEPA leaves "
        "0.050, the default closes 0.50 of it",
        "opsdesk.neutral.best_harness_test: 0.9950",
        "opsdesk.neutral.gepa_headroom: 0.0500",
        "opsdesk.neutral.full_minus_gepa: +0.0250 ± 0.0150",
        "opsdesk.neutral.full_share_of_gepa_headroom: 0.500",
        "opsdesk.neutral.proposed_check_minus_gepa_headroom: pass  (default +0.0250 above GEPA ≥ min(0.05, 0.5 × "
        "0.0500) = 0.0250; proposed, not issue 19's bar)",
    ]
    far = [seed_result(0, 0.85), seed_result(1, 0.88)]  # GEPA leaves 13.5 points: the 5-point cap binds
    wide = gepa_headroom.headroom("c", [seed_result(0, 0.89), seed_result(1, 0.90)], far, {0: 1.0, 1: 1.0})
    assert wide is not None and wide.required == pytest.approx(0.05) and wide.lead == pytest.approx(0.03)
    assert not wide.passes and "proposed_check_minus_gepa_headroom: FAIL" in gepa_headroom.lines(wide)[-1]
    assert gepa_headroom.headroom("c", full, gepa, {0: 1.0}) is None  # one paired seed: no standard error


def test_the_baseline_is_measured_as_the_bench_measures_a_node_on_test(tmp_path: Path) -> None:
    # a one-iteration bench run's baseline test is what the script computes for the same run seed
    sets = {"sessions": {"proposer": "neutral"}}
    ran = strategy_runs.run_one("opsdesk", sets, 3, 1, tmp_path / "run", tmp_path / "cache.sqlite", False)
    k = gepa_headroom.test_runs_of("opsdesk", tmp_path)
    (work := tmp_path / "work").mkdir()
    assert gepa_headroom.test_scores("opsdesk", [], [3], k, work) == {3: ran.baseline_test}
    best = gepa_headroom.test_scores("opsdesk", strategy_runs.bank_best("opsdesk"), [3], k, work)
    assert best[3] > ran.baseline_test + 0.3  # the bank's best combination, not the baseline again


def _records(path: Path, baseline: float) -> Path:
    rows = [
        Record("f", "opsdesk.neutral", name, {}, 30, seed_result(seed, test, baseline_test=baseline))
        for name, test in (("full", 0.97), ("gepa", 0.94))
        for seed in (0, 1)
    ]
    path.write_text("".join(r.to_json() + "\n" for r in rows))
    return path


def test_records_whose_baseline_the_script_cannot_reproduce_stop_it(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "argv", ["gepa_headroom.py", "--from", str(_records(tmp_path / "r.jsonl", 0.123))])
    with pytest.raises(SystemExit, match="does not measure as the bench does"):
        gepa_headroom.main()
    assert capsys.readouterr().out == "opsdesk.baseline_matches_records: 0 of 2 seeds\n"


def test_a_records_file_that_does_not_exist_is_named(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "argv", ["gepa_headroom.py", "--from", str(tmp_path / "nope.jsonl")])
    with pytest.raises(SystemExit, match=r"nope\.jsonl: no such records file"):
        gepa_headroom.main()

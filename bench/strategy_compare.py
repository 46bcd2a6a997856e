"""Compare one strategy of two records files seed by seed: an experiment against the default, or the default after a
change against the default before it. The two files are two code versions (two fingerprints), which `strategies.py
--from` refuses to mix on purpose; this reports them side by side, never as one sweep.

Per cell both files hold the strategy in, over the seeds both hold: `compare_seeds`, `compare_test` (base ->
candidate), `compare_minus_base_test` (paired, ± standard error, seeds better and worse),
`compare_within_2pts_of_dag_best`, `compare_false_accept_share`, `compare_rollouts_spent` (search),
`compare_llm_sessions` and `compare_moved` (each seed whose test moved, by how much).

Usage: python bench/strategy_compare.py --base FILE --candidate FILE [--strategy full]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import strategy_records
from strategy_report import Bars, default_bars, paired_stats
from strategy_runs import SeedResult
from strategy_table import CELLS


def _by_cell(path: Path, strategy: str) -> dict[str, dict[int, SeedResult]]:
    out: dict[str, dict[int, SeedResult]] = {}
    for record in strategy_records.load([path]):
        if record.strategy == strategy:
            out.setdefault(record.cell, {})[record.result.seed] = record.result
    return out


def compare_lines(base: Path, candidate: Path, strategy: str = "full") -> list[str]:
    """The grep-able lines comparing `strategy` of `candidate` with that of `base`, cell by cell in the bench's
    order. Raises `RecordsError` when no cell has the strategy on a seed both files hold."""
    before, after = _by_cell(base, strategy), _by_cell(candidate, strategy)
    lines: list[str] = []
    for cell in CELLS:
        seeds = sorted(set(before.get(cell, {})) & set(after.get(cell, {})))
        if not seeds:
            continue
        old = [before[cell][s] for s in seeds]
        new = [after[cell][s] for s in seeds]
        lines += _cell_lines(cell, old, new)
    if not lines:
        raise strategy_records.RecordsError(
            f"no cell where both files hold {strategy} on a common seed ({base}, {candidate})"
        )
    return lines


def _cell_lines(cell: str, old: list[SeedResult], new: list[SeedResult]) -> list[str]:
    def mean(runs: list[SeedResult], figure: str) -> float:
        return statistics.mean(float(getattr(r, figure) or 0) for r in runs)

    def bars(runs: list[SeedResult]) -> Bars:  # the bar figures as the bench's checks compute them
        found = default_bars({"full": runs})
        assert found is not None  # runs is never empty here
        return found

    b_old, b_new = bars(old), bars(new)
    w_old, w_new = sum(r.false_accepts for r in old), sum(r.false_accepts for r in new)
    stats = paired_stats(new, old)
    paired = "n/a  (one seed: no standard error)"
    if stats is not None:
        diff, se, up, down, _ = stats
        paired = f"{diff:+.4f} ± {se:.4f}  ({up} better, {down} worse)"
    spent_old, spent_new = b_old.spent, b_new.spent
    growth = f"{100 * (spent_new / spent_old - 1):+.1f} %" if spent_old else "n/a"
    moved = [f"{n.seed} {n.test - o.test:+.3f}" for o, n in zip(old, new, strict=True) if abs(n.test - o.test) > 1e-9]
    return [
        f"{cell}.compare_seeds: {len(old)}",
        f"{cell}.compare_test: {mean(old, 'test'):.4f} -> {mean(new, 'test'):.4f}",
        f"{cell}.compare_minus_base_test: {paired}",
        f"{cell}.compare_within_2pts_of_dag_best: {b_old.near:.2f} -> {b_new.near:.2f}",
        f"{cell}.compare_false_accept_share: {b_old.false_accepts:.3f} -> {b_new.false_accepts:.3f}  "
        f"({w_old} of {b_old.accepted} -> {w_new} of {b_new.accepted})",
        f"{cell}.compare_rollouts_spent: {spent_old:.0f} -> {spent_new:.0f}  ({growth})",
        f"{cell}.compare_llm_sessions: {mean(old, 'sessions'):.1f} -> {mean(new, 'sessions'):.1f}",
        f"{cell}.compare_moved: {', '.join(moved) or 'none'}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="records of the code compared against")
    parser.add_argument("--candidate", type=Path, required=True, help="records of the code under test")
    parser.add_argument("--strategy", default="full")
    args = parser.parse_args()
    try:
        lines = compare_lines(args.base, args.candidate, args.strategy)
    except strategy_records.RecordsError as exc:
        parser.exit(2, f"strategy_compare: {exc}\n")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()

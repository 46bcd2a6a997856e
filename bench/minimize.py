"""How much smaller the minimized harness is, and what it scores against the unminimized one.

    python bench/minimize.py [--benchmarks opsdesk,repofix] [--seeds 10] [--out DIR]

For each bundled offline benchmark and seed, a default run (`saddler init --template B --seed S`, then the run,
minimization at its end included; a finished run folder in DIR is reused), then from its record
(`saddler.minimized`): the changes and diff lines of the full best and of the minimized harness, both harnesses'
dev and test (the end of the run tests both), and the rollouts the minimization cost against the search's. Prints
one row per seed and grep-able `name: value` lines per benchmark: `minimize_changes_kept_share` (mean share of
the changes kept), `minimize_lines_kept_share`, `minimize_smaller_share` (seeds where something was removed),
`minimize_dev_delta` and `minimize_test_delta` (mean minimized minus full), `minimize_test_delta_min` (the worst
seed) and `minimize_rollouts_share` (minimization rollouts over the run's search rollouts); the same names
without the benchmark prefix pool every benchmark's seeds.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

from evodag.store import EvoDAG
from saddler.minimized import minimization
from saddler.run.folder import init_run
from saddler.run.loop import Optimizer


@dataclass(frozen=True)
class SeedRow:
    seed: int
    changes: int
    kept: int
    lines: tuple[int, int]
    dev: tuple[float, float]
    test: tuple[float, float]
    rollouts: int
    search_rollouts: int


def one_seed(out: Path, benchmark: str, seed: int) -> SeedRow | None:
    """Run (or reuse) one seed and read its minimization; None when the best was the baseline."""
    run = out / f"{benchmark}-s{seed}"
    if not (run / "best" / "EXPORT.json").is_file():
        init_run(run, template=benchmark, seed=seed, force=run.exists())
        Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        found = minimization(store, store.get_run().id)
        if found is None:
            return None
        full, small = store.get_node(found.best_node), store.get_node(found.node)
        search = sum(1 for r in store.rollouts() if r.split != "test") - found.rollouts
        return SeedRow(
            seed,
            found.changes,
            found.kept,
            found.lines,
            (full.dev_mean or 0.0, small.dev_mean or 0.0),
            (full.test_mean or 0.0, small.test_mean or 0.0),
            found.rollouts,
            search,
        )


def summarize(benchmark: str, rows: list[SeedRow], seeds: int) -> list[str]:
    """The grep-able lines for one benchmark (`opsdesk_minimize_…`), or for all of them (`benchmark` "")."""
    benchmark = f"{benchmark}_" if benchmark else ""
    if not rows:
        return [f"{benchmark}minimize_runs: 0 of {seeds} (every best was the baseline)"]

    def mean(values: list[float]) -> float:
        return statistics.fmean(values)

    test_deltas = [r.test[1] - r.test[0] for r in rows]
    return [
        f"{benchmark}minimize_runs: {len(rows)} of {seeds}",
        f"{benchmark}minimize_changes_kept_share: {mean([r.kept / r.changes for r in rows]):.3f}",
        f"{benchmark}minimize_lines_kept_share: {mean([r.lines[1] / max(1, r.lines[0]) for r in rows]):.3f}",
        f"{benchmark}minimize_smaller_share: {mean([float(r.kept < r.changes) for r in rows]):.3f}",
        f"{benchmark}minimize_dev_delta: {mean([r.dev[1] - r.dev[0] for r in rows]):+.4f}",
        f"{benchmark}minimize_test_delta: {mean(test_deltas):+.4f}",
        f"{benchmark}minimize_test_delta_min: {min(test_deltas):+.4f}",
        f"{benchmark}minimize_rollouts_share: {mean([r.rollouts / max(1, r.search_rollouts) for r in rows]):.3f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", default="opsdesk,repofix")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("/tmp/saddler-bench-minimize"))
    args = parser.parse_args()
    lines: list[str] = []
    pooled: list[SeedRow] = []
    names = args.benchmarks.split(",")
    for benchmark in names:
        rows = []
        for seed in range(args.seeds):
            row = one_seed(args.out, benchmark, seed)
            if row is None:
                print(f"{benchmark} seed {seed}: the best is the baseline, nothing to minimize", flush=True)
                continue
            rows.append(row)
            print(
                f"{benchmark} seed {seed}: kept {row.kept}/{row.changes} changes, lines {row.lines[0]} -> "
                f"{row.lines[1]}, dev {row.dev[0]:.3f} -> {row.dev[1]:.3f}, test {row.test[0]:.3f} -> "
                f"{row.test[1]:.3f}, {row.rollouts} rollouts (search {row.search_rollouts})",
                flush=True,
            )
        lines += summarize(benchmark, rows, args.seeds)
        pooled += rows
    print("\n".join([*lines, *summarize("", pooled, args.seeds * len(names))]))


if __name__ == "__main__":
    main()

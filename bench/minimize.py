"""How much smaller the minimized harness is, and what it scores against the unminimized one.

    python bench/minimize.py [--benchmarks opsdesk,repofix] [--seeds 10] [--variants default,...] [--out DIR]

For each bundled offline benchmark, seed and variant, a run (`saddler init --template B --seed S`, the variant's
`[run.minimize]` settings, then the run, minimization at its end included; a finished run folder in DIR is
reused), then from its record
(`saddler.minimized`): the changes and diff lines of the full best and of the minimized harness, both harnesses'
dev and test (the end of the run tests both), and the rollouts the minimization cost against the search's. Prints
one row per seed and grep-able `name: value` lines per benchmark: `minimize_changes_kept_share` (mean share of
the changes kept), `minimize_lines_kept_share`, `minimize_smaller_share` (seeds where something was removed),
`minimize_dev_delta` and `minimize_test_delta` (mean minimized minus full), `minimize_test_delta_min` (the worst
seed), `minimize_test_lower_share` (seeds where the minimized harness scores lower on test),
`minimize_returned_test_delta` (the node the run returns, which the ranking policy picks between the two, minus
the full best) and `minimize_rollouts_share` (minimization rollouts over the run's search rollouts); the same
names without the benchmark prefix pool every benchmark's seeds. A variant other than `default` prefixes its
names with `<variant>_` (`opsdesk_no_train_check_minimize_test_delta`); the search does not depend on
`[run.minimize]`, so every variant of a seed minimizes the same best node (checked), a paired comparison.
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

VARIANTS: dict[str, dict[str, object]] = {
    "default": {},  # the shipped `[run.minimize]`
    "train_fixed": {"train_check": "fixed"},  # train only on the tasks the change's edge fixed
    "no_train_check": {"train_check": "off"},  # dev alone decides a cut (the first default)
    "not_clearly_worse": {"rule": "not_clearly_worse"},
}


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
    returned_test: float
    best_commit: str


def one_seed(out: Path, benchmark: str, seed: int, variant: str = "default") -> SeedRow | None:
    """Run (or reuse) one seed of `variant` and read its minimization; None when the best was the baseline."""
    run = out / (f"{benchmark}-s{seed}" if variant == "default" else f"{variant}/{benchmark}-s{seed}")
    if not (run / "best" / "EXPORT.json").is_file():
        overrides = {"minimize": VARIANTS[variant]} if VARIANTS[variant] else None
        init_run(run, template=benchmark, seed=seed, force=run.exists(), overrides=overrides)
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
            store.get_node(store.get_run().best_node_id or 0).test_mean or 0.0,
            full.commit,
        )


def summarize(benchmark: str, rows: list[SeedRow], seeds: int, variant: str = "default") -> list[str]:
    """The grep-able lines for one benchmark (`opsdesk_minimize_…`), or for all of them (`benchmark` "")."""
    benchmark = f"{benchmark}_" if benchmark else ""
    if variant != "default":
        benchmark += f"{variant}_"
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
        f"{benchmark}minimize_test_lower_share: {mean([float(d < -1e-9) for d in test_deltas]):.3f}",
        f"{benchmark}minimize_returned_test_delta: {mean([r.returned_test - r.test[0] for r in rows]):+.4f}",
        f"{benchmark}minimize_rollouts_share: {mean([r.rollouts / max(1, r.search_rollouts) for r in rows]):.3f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", default="opsdesk,repofix")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--variants", default="default", help=f"comma-separated, of: {', '.join(VARIANTS)}")
    parser.add_argument("--out", type=Path, default=Path("/tmp/saddler-bench-minimize"))
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    lines: list[str] = []
    names = args.benchmarks.split(",")
    for variant in variants:
        pooled: list[SeedRow] = []
        for benchmark in names:
            rows = []
            for seed in range(args.seeds):
                row = one_seed(args.out, benchmark, seed, variant)
                if row is None:
                    print(f"{variant} {benchmark} seed {seed}: the best is the baseline, nothing to minimize")
                    continue
                rows.append(row)
                print(
                    f"{variant} {benchmark} seed {seed}: kept {row.kept}/{row.changes} changes, lines {row.lines[0]}"
                    f" -> {row.lines[1]}, dev {row.dev[0]:.3f} -> {row.dev[1]:.3f}, test {row.test[0]:.3f} -> "
                    f"{row.test[1]:.3f}, returned {row.returned_test:.3f}, {row.rollouts} rollouts (search "
                    f"{row.search_rollouts})",
                    flush=True,
                )
                if variant != variants[0]:
                    first = one_seed(args.out, benchmark, seed, variants[0])
                    if first is not None and first.best_commit != row.best_commit:
                        raise SystemExit(
                            f"{benchmark} seed {seed}: {variant} minimized another best than {variants[0]}"
                        )
            lines += summarize(benchmark, rows, args.seeds, variant)
            pooled += rows
        lines += summarize("", pooled, args.seeds * len(names), variant)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

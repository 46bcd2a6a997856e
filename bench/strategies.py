"""Compare the full method with its ablations on opsdesk, offline, over several seeds.

Prints per strategy the test Pass@1 (mean ± std over seeds of the returned harness) and the rollouts
spent to first reach 90 % of the best dev score seen by any strategy (strategies that never evaluate dev
get their kept nodes' dev scores measured after the run, uncharged, at the rollout count when each was kept):

    strategy_<name>_test: <mean>
    strategy_<name>_rollouts: <n>      (median over seeds; "inf" when never reached)

Usage: python bench/strategies.py [--seeds 5] [--iterations 24] [--out DIR]
All runs share one rollout cache, so identical rollouts across strategies execute once.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from evodag.store import EvoDAG
from saddler.run.folder import init_run
from saddler.run.loop import Optimizer
from saddler.run.ops import evaluate_node

STRATEGIES: dict[str, dict[str, Any]] = {
    "full": {},
    "dev_never": {"policies": {"dev_eval": "never", "evolution": "continue"}},
    "phases_off": {"policies": {"phases": "none"}},
    "greedy": {"policies": {"dev_eval": "never", "evolution": "continue", "phases": "none"}},
    # Meta-Harness style: every candidate on the whole train split and on dev, no phase schedule.
    "full_batch": {"policies": {"sampler": "full", "dev_eval": "always", "phases": "none"}},
}


def dev_curve(db: Path) -> list[tuple[int, float]]:
    """(cumulative rollouts when a node's dev score became known, best dev so far)."""
    with EvoDAG(db, readonly=True) as store:
        rows = store.rollouts()
        nodes = {n.id: n for n in store.nodes()}
    last_dev_row: dict[int, int] = {}
    for position, row in enumerate(sorted(rows, key=lambda r: r.id), start=1):
        if row.split == "dev":
            last_dev_row[row.node_id] = position
    curve, best = [], -1.0
    for position, node_id in sorted((p, n) for n, p in last_dev_row.items()):
        dev = nodes[node_id].dev_mean
        if dev is not None and nodes[node_id].status in ("baseline", "accepted", "neutral") and dev > best:
            best = dev
        curve.append((position, best))
    return curve


def posthoc_dev_curve(run_dir: Path) -> list[tuple[int, float]]:
    """For strategies that never look at dev: the dev score each kept node would have had, measured after
    the run (not counted as spent), placed at the cumulative rollouts when the node was kept."""
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        rows = sorted(store.rollouts(), key=lambda r: r.id)
        kept = [n.id for n in store.nodes() if n.status in ("baseline", "accepted", "neutral")]
    last_row = {}
    for position, row in enumerate(rows, start=1):
        last_row[row.node_id] = position
    scored = sorted((last_row.get(n, 0), evaluate_node(run_dir, n, "dev", 1, quiet=True)["mean"]) for n in kept)
    curve, best = [], -1.0
    for position, dev in scored:
        best = max(best, dev)
        curve.append((position, best))
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="saddler-strategies-"))
    cache = out / "shared-cache.sqlite"
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in STRATEGIES}
    for name, overrides in STRATEGIES.items():
        for seed in range(args.seeds):
            run_dir = out / f"{name}-s{seed}"
            sets: dict[str, Any] = {"loop": {"max_iterations": args.iterations}, "executor": {"cache": str(cache)}}
            for key, table in overrides.items():
                sets.setdefault(key, {}).update(table)
            init_run(run_dir, template="opsdesk", seed=seed, force=True, overrides=sets)
            started = time.monotonic()
            outcome = Optimizer(run_dir, quiet=True).run()
            with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
                spent = store.count_rollouts()
            best_test = outcome.best_test[0] if outcome.best_test else 0.0
            base_test = outcome.baseline_test[0] if outcome.baseline_test else 0.0
            curve = dev_curve(run_dir / "evodag.sqlite")
            if overrides.get("policies", {}).get("dev_eval") == "never":
                curve = posthoc_dev_curve(run_dir)
            results[name].append({"test": best_test, "baseline": base_test, "curve": curve, "rollouts": spent})
            print(
                f"# {name} seed {seed}: test {best_test:.3f} rollouts {spent} ({time.monotonic() - started:.1f} s)",
                flush=True,
            )
    best_dev = max((d for runs in results.values() for r in runs for _, d in r["curve"]), default=0.0)
    threshold = 0.9 * best_dev
    print(f"# best dev seen by any strategy: {best_dev:.3f}; threshold {threshold:.3f}")
    for name, runs in results.items():
        tests = [r["test"] for r in runs]
        reach = [next((p for p, d in r["curve"] if d >= threshold), float("inf")) for r in runs]
        median_reach = statistics.median(reach)
        std = statistics.pstdev(tests) if len(tests) > 1 else 0.0
        print(
            f"# {name}: test {statistics.mean(tests):.3f} ± {std:.3f}, rollouts to 90% of best dev "
            f"(per seed) {reach}, total rollouts {[r['rollouts'] for r in runs]}"
        )
        print(f"strategy_{name}_test: {statistics.mean(tests):.4f}")
        gain = statistics.mean(r["test"] - r["baseline"] for r in runs)
        print(f"strategy_{name}_gain: {gain:.4f}")
        print(f"strategy_{name}_test_std: {std:.4f}")
        print(f"strategy_{name}_rollouts: {median_reach if median_reach != float('inf') else 'inf'}")


if __name__ == "__main__":
    main()

"""Is "within 2 points of the DAG's best" a gap or a winner's curse? Re-measure on fresh test seeds.

The strategies bench evaluates every node of a finished run on test (the run's `test_runs` seeds) and calls the
best of them the DAG's best. With 30 to 40 nodes, the maximum of noisy estimates is biased upward: the node that is
best on those seeds is partly the one those seeds favoured. This script takes finished bench runs (folders with
`bench-posthoc.json`, e.g. `DIR/repofix/neutral/full-s3` of a `bench/strategies.py --out DIR` sweep), and for each
evaluates the returned node and the DAG's best again on `--fresh` test seeds the post-hoc evaluation did not use
(seeds `test_runs` .. `test_runs + fresh - 1` of the run's test seed list). The folders are copied into `--work`
first with a private rollout cache: the originals are never written.

Prints per run `fresh_best <run>: returned nR post P fresh F, dag best nB post P fresh F`, then grep-able lines:
`fresh_best_runs`, `fresh_best_within_2pts_posthoc` / `_fresh` (share of runs whose returned node is within 0.02 of
the DAG's best on the post-hoc seeds / on the fresh ones) and `fresh_best_gap_posthoc` / `_fresh` (mean gap).

Could the search have returned the DAG's best? It selects on dev, so both nodes are also evaluated on dev with the
run's own dev seeds (what the run could have seen). `fresh_best_gap_runs_fresh` counts the runs more than 2 points
behind on the fresh seeds, `fresh_best_gap_runs_best_higher_on_dev` those of them whose DAG's best is higher on dev
than the returned node: a gap a selection on dev could close. The others are nodes dev does not rank above the
returned one (dev and test are other groups of tasks), which no rule that decides on train and dev could return.

`--dev-reachable` asks the same of every node instead: which nodes would the run's own dev rule have preferred to
the one it returned? Each node more than 2 points above the returned one on the post-hoc test is evaluated on dev
with the run's dev seeds and compared with the returned node task by task, as acceptance compares two nodes
(P(better) from the paired sign test, `policies.acceptance_confidence`). `fresh_best_within_2pts_of_dev_reachable`
is the share of runs whose returned node is within 2 points of every node dev clearly ranks above it (a run with no
such node counts as within): what the search and its selection could have returned, apart from what only test
shows. `fresh_best_dev_reachable_gap_runs` counts the runs that miss it.
Rollouts run in this process (`bench/inprocess.py`).

Usage: python bench/fresh_best.py RUN [RUN ...] [--fresh 6] [--work DIR]
       python bench/fresh_best.py RUN [RUN ...] --dev-reachable [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import inprocess
from strategy_runs import NEAR, PASS_RATE, POSTHOC, dev_reachable_test

from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.run.ops import evaluate_nodes


@dataclass(frozen=True)
class Remeasured:
    """One run: its returned node and its DAG's best, on the post-hoc seeds and on fresh ones."""

    run: str
    returned: int
    best: int
    returned_posthoc: float
    best_posthoc: float
    returned_fresh: float
    best_fresh: float
    returned_dev: float
    best_dev: float

    def gap(self, fresh: bool) -> float:
        return self.best_fresh - self.returned_fresh if fresh else self.best_posthoc - self.returned_posthoc


@dataclass(frozen=True)
class DevReachable:
    """One run: its returned node's post-hoc test, and the best post-hoc test among the nodes the run's dev rule
    clearly ranks above it (`strategy_runs.dev_reachable_test`: the returned node's own when there is none)."""

    run: str
    returned: int
    returned_test: float
    reachable_test: float

    @property
    def gap(self) -> float:
        return max(0.0, self.reachable_test - self.returned_test)


def private_copy(run: Path, work: Path) -> tuple[Path, dict[int, float], int]:
    """Copy `run` into `work` (a private cache, no traces or worktrees): the copy, its post-hoc test per node and
    its returned node."""
    if not (run / POSTHOC).is_file() or not (run / "evodag.sqlite").is_file():
        raise SystemExit(f"{run}: not a finished bench run (no {POSTHOC}): give a run bench/strategies.py measured")
    copy = work / "-".join(run.resolve().parts[-3:])
    if not copy.exists():
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns("worktrees", "traces"))
    config = copy / "saddler.toml"
    cache = (work / "cache.sqlite").as_posix()
    config.write_text(re.sub(r'(?m)^cache = ".*"$', f'cache = "{cache}"', config.read_text()))
    tests = {int(k): float(v) for k, v in json.loads((copy / POSTHOC).read_text())["test"].items()}
    with EvoDAG(copy / "evodag.sqlite", readonly=True) as store:
        returned = store.get_run().best_node_id
    if returned is None or not tests:
        raise SystemExit(f"{run}: no returned node or no post-hoc tests: measure the run with bench/strategies.py")
    return copy, tests, returned


def dev_reachable(run: Path, work: Path) -> DevReachable:
    """`strategy_runs.dev_reachable_test` of `run`, measured on a private copy (`private_copy`)."""
    copy, tests, returned = private_copy(run, work)
    reachable = dev_reachable_test(copy, returned, tests, load_run_config(copy).loop.dev_runs)
    return DevReachable(str(run), returned, tests[returned], reachable)


def reachable_summary(rows: list[DevReachable]) -> list[str]:
    """The grep-able lines of `--dev-reachable` over `rows`."""
    behind = sum(1 for r in rows if r.gap > NEAR + 1e-9)
    return [
        f"fresh_best_runs: {len(rows)}",
        f"fresh_best_within_2pts_of_dev_reachable: {(len(rows) - behind) / len(rows):.3f}",
        f"fresh_best_dev_reachable_gap_runs: {behind}",
    ]


def remeasure(run: Path, work: Path, fresh: int) -> Remeasured:
    """Copy `run` into `work` (`private_copy`) and evaluate its returned node and its DAG's best (the first best on
    the post-hoc test) on `fresh` test seeds after the run's own, and on dev with the run's own dev seeds."""
    copy, tests, returned = private_copy(run, work)
    best = max(tests, key=lambda n: (tests[n], -n))
    loop = load_run_config(copy).loop
    k = loop.test_runs
    pair = sorted({returned, best})
    found = evaluate_nodes(copy, pair, "test", k + fresh, quiet=True, score_kind=PASS_RATE)
    on_fresh = {n: sum(f["runs"][k:]) / fresh for n, f in found.items()}
    on_dev = {n: f["mean"] for n, f in evaluate_nodes(copy, pair, "dev", loop.dev_runs, True, PASS_RATE).items()}
    return Remeasured(
        str(run), returned, best, tests[returned], tests[best], on_fresh[returned], on_fresh[best],
        on_dev[returned], on_dev[best],
    )  # fmt: skip


def summary(rows: list[Remeasured]) -> list[str]:
    """The grep-able lines over `rows`."""
    n = len(rows)
    out = [f"fresh_best_runs: {n}"]
    for label, fresh in (("posthoc", False), ("fresh", True)):
        near = sum(1 for r in rows if r.gap(fresh) <= NEAR + 1e-9) / n
        out.append(f"fresh_best_within_2pts_{label}: {near:.3f}")
    for label, fresh in (("posthoc", False), ("fresh", True)):
        out.append(f"fresh_best_gap_{label}: {sum(r.gap(fresh) for r in rows) / n:.4f}")
    behind = [r for r in rows if r.gap(True) > NEAR + 1e-9]
    out.append(f"fresh_best_gap_runs_fresh: {len(behind)}")
    higher_on_dev = sum(1 for r in behind if r.best_dev > r.returned_dev + 1e-9)
    out.append(f"fresh_best_gap_runs_best_higher_on_dev: {higher_on_dev}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--fresh", type=int, default=6, help="fresh test seeds per node")
    parser.add_argument("--work", type=Path, default=None, help="where the copies go (default: a temporary folder)")
    parser.add_argument("--dev-reachable", action="store_true", help="the nodes dev clearly ranks above the returned")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="saddler-fresh-best-"))
    work.mkdir(parents=True, exist_ok=True)
    inprocess.install()
    if args.dev_reachable:
        reached = []
        for run in args.runs:
            d = dev_reachable(run, work)
            reached.append(d)
            print(f"fresh_best {run}: returned n{d.returned} test {d.returned_test:.3f}; best test of it and what dev "
                  f"clearly prefers {d.reachable_test:.3f}")  # fmt: skip
        for line in reachable_summary(reached):
            print(line)
        return
    rows = []
    for run in args.runs:
        r = remeasure(run, work, args.fresh)
        rows.append(r)
        print(f"fresh_best {run}: returned n{r.returned} post {r.returned_posthoc:.3f} fresh {r.returned_fresh:.3f}, "
              f"dag best n{r.best} post {r.best_posthoc:.3f} fresh {r.best_fresh:.3f}; "
              f"dev {r.returned_dev:.3f} vs {r.best_dev:.3f}", flush=True)  # fmt: skip
    for line in summary(rows):
        print(line)


if __name__ == "__main__":
    main()

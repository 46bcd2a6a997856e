"""Compare the full method with its ablations and the curriculum variants on opsdesk, offline, over several seeds.

Every figure is computed the same way for every strategy (per seed, then over seeds):

- rollouts spent: the search (train + dev rollouts the run stored before its end), and test separately;
- test: Pass@1 of the node the strategy *returns* by its own rule (best dev, or the latest kept node when it
  never looks at dev), over the run's k test seeds;
- rollouts to 90 % of its own final dev: along the run, the node the strategy would have returned at each point,
  the first point where that node's dev score reaches 90 % of the returned node's. Dev-blind strategies have no
  dev score of their own: their returned nodes are evaluated on dev after the run *and those rollouts are
  charged* (added where each node became the one returned), as a dev-evaluating strategy pays them during search.
  A seed that never reaches it is counted, and medians leave such seeds out (the line says so).

Grep-able lines per strategy:

    strategy_<name>_rollouts_spent: <mean search rollouts>
    strategy_<name>_test_rollouts: <mean test rollouts>
    strategy_<name>_test: <mean test of the returned node>     strategy_<name>_test_std, strategy_<name>_gain
    strategy_<name>_returned_dev: <mean dev of the returned node (charged post-hoc for dev-blind strategies)>
    strategy_<name>_rollouts_to_90pct_own_dev: <median over the seeds that reach it>
    strategy_<name>_never_90pct_own_dev: <seeds that never reach it>

then what the search did (`strategy_<name>_capability_in_returned`, `..._saturated_batches`,
`..._blocked_iterations`) and `finding_*` lines comparing `full` with `phases_off` (see `explain`).

Usage: python bench/strategies.py [--seeds 10] [--iterations 30] [--only full,phases_off] [--out DIR]
All runs share one rollout cache, so a rollout identical across strategies executes once (it is still counted
as spent by each run that stores it).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evodag.models import Node, RolloutRow
from evodag.store import EvoDAG
from saddler.policies.ranking import pick_best
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
    "curriculum": {"policies": {"sampler": "curriculum"}},
    # capability until every train task was shown once (one epoch here, where the opsdesk template says two)
    "full_coverage": {"policies": {"phase_transition": "full_coverage"}},
    "curriculum_full_coverage": {"policies": {"sampler": "curriculum", "phase_transition": "full_coverage"}},
    # not a method: tests the explanation of phases_off > full (capability patches stay allowed when steering)
    "late_capability": {"policies": {"steering_allows_capability": True}},
}
KEPT = ("baseline", "accepted", "neutral")
REACH = 0.9


@dataclass
class SeedResult:
    seed: int
    test: float
    baseline_test: float
    spent: int
    test_spent: int
    returned_dev: float
    reach: int | None
    charged_dev: int
    capability_in_returned: int
    saturated: int
    blocked: int
    wall_s: float
    notes: list[str] = field(default_factory=list)


def trajectory(nodes: dict[int, Node], known_at: dict[int, int], dev_seen: set[int]) -> list[tuple[int, int]]:
    """(position, node the strategy would return) each time the answer may change: a kept node becomes known
    (with its dev score if the strategy measured it by then). `pick_best` is the loop's own rule."""
    order = sorted((pos, nid) for nid, pos in known_at.items() if nodes[nid].status in KEPT)
    out: list[tuple[int, int]] = []
    known: list[Node] = []
    for pos, nid in order:
        node = nodes[nid]
        known.append(node if nid in dev_seen else Node(**{**vars(node), "dev_mean": None}))
        best = pick_best(known)
        if best is not None and (not out or out[-1][1] != best.id):
            out.append((pos, best.id))
    return out


def settled_at(search: list[RolloutRow], baseline: int | None) -> dict[int, int]:
    """Per node, the search position (1-based rollout count) when its verdict was known: the end of its dev
    evaluation if it had one, else the end of its first evaluation (the candidate's own batch; later rows of the
    same node are its evaluations as a parent). The baseline without dev is known from the start."""
    first_end: dict[int, int] = {}
    closed: set[int] = set()
    last_dev: dict[int, int] = {}
    for position, row in enumerate(search, start=1):
        nid = row.node_id
        if nid not in first_end or (nid not in closed and first_end[nid] == position - 1):
            first_end[nid] = position  # one evaluation's rows are contiguous: still the first one
        else:
            closed.add(nid)
        if row.split == "dev":
            last_dev[nid] = position
    known = {nid: last_dev.get(nid, end) for nid, end in first_end.items()}
    if baseline is not None and baseline not in last_dev:
        known[baseline] = 0
    return known


def measure(run_dir: Path, returned: int, dev_runs: int, n_dev: int) -> SeedResult:
    """Every figure of one finished run (post-hoc dev evaluations happen last, after the counts)."""
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        rows = sorted(store.rollouts(), key=lambda r: r.id)
        nodes = {n.id: n for n in store.nodes()}
        iterations = store.iterations()
        lineage = store.lineage(returned)
        run = store.get_run()
    search = [r for r in rows if r.split != "test"]
    known_at = settled_at(search, run.baseline_node_id)
    dev_seen = {r.node_id for r in search if r.split == "dev"}
    path = trajectory(nodes, known_at, dev_seen)
    notes = [] if path and path[-1][1] == returned else [f"trajectory ends at n{path[-1][1] if path else '-'}"]
    dev: dict[int, float] = {nid: nodes[nid].dev_mean or 0.0 for nid in dev_seen if nodes[nid].dev_mean is not None}
    charged, reach = 0, None
    cost: list[int] = []
    for _, nid in path:
        if nid not in dev:  # a dev-blind strategy's answer: measured now, and charged
            dev[nid] = evaluate_node(run_dir, nid, "dev", dev_runs, quiet=True)["mean"]
            charged += n_dev * dev_runs
        cost.append(charged)
    final = dev[returned] if returned in dev else dev[path[-1][1]]
    for (position, nid), paid in zip(path, cost, strict=True):
        if dev[nid] >= REACH * final - 1e-12:
            reach = position + paid
            break
    test_rows = [r for r in rows if r.split == "test"]
    returned_node = nodes[returned]
    base = nodes[run.baseline_node_id or returned]
    blocked = sum(1 for it in iterations if it.decision == "no_patch" and it.parent_id is not None)
    return SeedResult(
        seed=run.seed,
        test=returned_node.test_mean or 0.0,
        baseline_test=base.test_mean or 0.0,
        spent=len(search),
        test_spent=len(test_rows),
        returned_dev=final,
        reach=reach,
        charged_dev=charged,
        capability_in_returned=sum(1 for n in lineage if n.patch_kind == "capability"),
        saturated=sum(1 for it in iterations if it.decision == "no_training_failures"),
        blocked=blocked,
        wall_s=0.0,
        notes=notes,
    )


def run_one(name: str, overrides: dict[str, Any], seed: int, iterations: int, out: Path, cache: Path) -> SeedResult:
    run_dir = out / f"{name}-s{seed}"
    sets: dict[str, Any] = {"loop": {"max_iterations": iterations}, "executor": {"cache": str(cache)}}
    for key, table in overrides.items():
        sets.setdefault(key, {}).update(table)
    init_run(run_dir, template="opsdesk", seed=seed, force=True, overrides=sets)
    started = time.monotonic()
    outcome = Optimizer(run_dir, quiet=True).run()
    from saddler.config import load_run_config

    cfg = load_run_config(run_dir)
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        n_dev = len({r.task_id for r in store.rollouts(split="dev")}) or 40
    result = measure(run_dir, outcome.best_node, cfg.loop.dev_runs, n_dev)
    result.wall_s = time.monotonic() - started
    return result


def _mean(xs: list[float]) -> float:
    return statistics.mean(xs) if xs else 0.0


def report(name: str, runs: list[SeedResult], say: Callable[[str], None]) -> None:
    tests = [r.test for r in runs]
    std = statistics.pstdev(tests) if len(tests) > 1 else 0.0
    reached = [r.reach for r in runs if r.reach is not None]
    never = len(runs) - len(reached)
    median = statistics.median(reached) if reached else float("nan")
    say(
        f"# {name}: test {_mean(tests):.3f} ± {std:.3f}; search rollouts {[r.spent for r in runs]}; "
        f"to 90% of own final dev {[r.reach if r.reach is not None else 'never' for r in runs]}"
        + (f" (incl. charged post-hoc dev {[r.charged_dev for r in runs]})" if any(r.charged_dev for r in runs) else "")
    )
    for r in runs:
        for note in r.notes:
            say(f"# {name} seed {r.seed}: {note}")
    say(f"strategy_{name}_rollouts_spent: {_mean([r.spent for r in runs]):.1f}")
    say(f"strategy_{name}_test_rollouts: {_mean([r.test_spent for r in runs]):.1f}")
    say(f"strategy_{name}_test: {_mean(tests):.4f}")
    say(f"strategy_{name}_test_std: {std:.4f}")
    say(f"strategy_{name}_gain: {_mean([r.test - r.baseline_test for r in runs]):.4f}")
    say(f"strategy_{name}_returned_dev: {_mean([r.returned_dev for r in runs]):.4f}")
    label = f"median over the {len(reached)} seed(s) that reach it" + (f"; {never} never do" if never else "")
    say(f"strategy_{name}_rollouts_to_90pct_own_dev: {median:.0f}  ({label})")
    say(f"strategy_{name}_never_90pct_own_dev: {never}")
    say(f"strategy_{name}_capability_in_returned: {_mean([r.capability_in_returned for r in runs]):.2f}")
    say(f"strategy_{name}_saturated_batches: {_mean([r.saturated for r in runs]):.2f}")
    say(f"strategy_{name}_blocked_iterations: {_mean([r.blocked for r in runs]):.2f}")


def explain(results: dict[str, list[SeedResult]], say: Callable[[str], None]) -> None:
    """The `full` vs `phases_off` finding, with the figures that support it (only for the strategies that ran)."""
    if "full" not in results or "phases_off" not in results:
        return
    full, off = _mean([r.test for r in results["full"]]), _mean([r.test for r in results["phases_off"]])
    verdict = "above" if off > full else "not above"
    say(f"finding_phases_off_minus_full_test: {off - full:+.4f}  (phases_off {off:.3f} is {verdict} full {full:.3f})")
    for name in ("full", "phases_off", "late_capability"):
        if name in results:
            runs = results[name]
            capability = _mean([r.capability_in_returned for r in runs])
            say(
                f"# {name}: capability patches in the returned lineage {capability:.2f}, "
                f"iterations blocked (no allowed patch for the failures seen) {_mean([r.blocked for r in runs]):.2f}"
            )
    say(
        "# why: the opsdesk template keeps Capability for 2 epochs (14 iterations) and then allows only Steering. "
        "Some capability fixes only pay off once others are in (they tie on the batch and are rejected inside the "
        "window), so a seed that leaves the window without them cannot add them later: its diagnoses see "
        "pagination/contacts symptoms and find no allowed patch (blocked iterations). phases_off keeps every kind "
        "allowed and picks them up later. late_capability (the phase schedule with capability still allowed in "
        "Steering) tests this: it should close most of the gap."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--only", default="", help="comma-separated strategy names (default: all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(STRATEGIES)
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        parser.error(f"unknown strategy {', '.join(unknown)}; choose from {', '.join(STRATEGIES)}")
    out = args.out or Path(tempfile.mkdtemp(prefix="saddler-strategies-"))
    cache = out / "shared-cache.sqlite"
    started = time.monotonic()
    results: dict[str, list[SeedResult]] = {}
    for name in names:
        for seed in range(args.seeds):
            r = run_one(name, STRATEGIES[name], seed, args.iterations, out, cache)
            results.setdefault(name, []).append(r)
            print(
                f"# {name} seed {seed}: test {r.test:.3f} search {r.spent} test rollouts {r.test_spent} "
                f"returned dev {r.returned_dev:.3f} to-90% {r.reach if r.reach is not None else 'never'} "
                f"({r.wall_s:.1f} s)",
                flush=True,
            )
    for name, runs in results.items():
        report(name, runs, lambda line: print(line, flush=True))
    explain(results, lambda line: print(line, flush=True))
    print(f"# {len(names)} strategies x {args.seeds} seeds in {time.monotonic() - started:.0f} s; runs in {out}")


if __name__ == "__main__":
    main()

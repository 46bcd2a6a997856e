"""EvoDAG at scale: build a synthetic 10,000-node / 200,000-rollout DAG with lessons, time the queries.

    .venv/bin/python bench/evodag_scale.py [--nodes 10000] [--rollouts-per-node 20] [--repeat 7] [--keep DIR]

Builds through the store API (nodes, edges, transitions and lessons inside `transaction()`, rollouts
with the bulk helper `EvoDAG.add_rollouts`), then prints the median of `--repeat` in-process runs as
`evodag_<query>_ms: <median>` for summary, lineage (of the deepest node), scenario (with the task registry),
best, lessons(task), history (last 50 iterations) and lineage_train_outcomes (the curriculum sampler's view
of the deepest node), then `evodag_history_all_ms` (every iteration, not budgeted: its output is the size
of the run), `evodag_session_view_ms` (writing the session view sessions query, `evodag.view`, done before every
session of an LLM backend; not budgeted), then `evodag_cli_summary_s: <median>` (wall) for the whole
`evo-dag summary --json` process and its CPU time (`evodag_cli_summary_cpu_s`).
Budgets: 50 ms per query, 1 s for the CLI process; exit status 1 if one is exceeded.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evodag.decisions import ACCEPTED, INVALID, KEPT_DECISIONS, NEUTRAL, PENDING, REJECTED
from evodag.history import history
from evodag.queries import lineage_train_outcomes
from evodag.store import EvoDAG
from evodag.view import write_session_view

QUERY_BUDGET_MS = 50.0
CLI_BUDGET_S = 1.0
TRAIN_TASKS = [f"train-{i:03d}" for i in range(300)]
DEV_TASKS = [f"dev-{i:02d}" for i in range(50)]
STATUSES = (ACCEPTED, REJECTED, INVALID, NEUTRAL, PENDING)
KINDS = ("patch", "patch", "patch", "rebase", "cherry_pick", "revert")
CATEGORIES = ("fixed", "regressed", "still_failing", "general")
ATTRIBUTIONS = ("true_fix", "true_regression", "stochastic", "uncertain")


def build(path: Path, n_nodes: int, per_node: int, seed: int = 0, reuse: bool = False) -> dict[str, Any]:
    """Write the synthetic DAG to `path` (or, with `reuse`, read the one there); returns build statistics and
    the ids the timings use."""
    started = time.perf_counter()
    if reuse and path.exists():
        with EvoDAG(path) as s:  # read-write: migrates a file built by an older evodag
            depth: dict[int, int] = {}
            for n in s.nodes():  # parents have smaller ids
                depth[n.id] = 0 if n.parent_id is None else depth[n.parent_id] + 1
            deepest = max(depth, key=lambda n: (depth[n], n))
            return {"reused": True, "graph_s": 0.0, "total_s": 0.0, "rollouts": s.count_rollouts(), "deepest": deepest,
                    "depth": depth[deepest]}  # fmt: skip
    rng = random.Random(seed)
    depth = {}
    with EvoDAG(path) as s:
        run = s.create_run({"bench": "evodag_scale"}, seed)
        with s.transaction():
            root = s.add_node(run.id, "0" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline").id
            s.update_run(run.id, baseline_node_id=root)
            depth[root] = 0
            ids = [root]
            for i in range(1, n_nodes):
                # mostly extend a recent node (deep chains), sometimes branch from anywhere (rebase-like)
                parent = rng.choice(ids[-30:]) if rng.random() < 0.8 else rng.choice(ids)
                kind = rng.choice(KINDS)
                status = rng.choice(STATUSES)
                node = s.add_node(run.id, f"{i:040x}", parent, i, "capability", kind, kind, status=status,
                                  hypothesis={"claim": f"change {i}"}, lines_changed=rng.randint(1, 400))  # fmt: skip
                depth[node.id] = depth[parent] + 1
                ids.append(node.id)
                edge = s.add_edge(run.id, parent, node.id, kind, f"--- a/f{i % 17}.py\n+++ b/f{i % 17}.py\n+x = {i}\n",
                                  [f"f{i % 17}.py"], 1, 0)  # fmt: skip
                batch = rng.sample(TRAIN_TASKS, 6)
                s.set_edge_transitions(edge.id, batch[:2], batch[2:3], batch[3:4], batch[4:])
                if status in KEPT_DECISIONS:
                    s.update_node(node.id, dev_mean=round(rng.random(), 4), dev_std=0.01)
                s.add_lesson(run.id, rng.choice(CATEGORIES), rng.choice(ATTRIBUTIONS), f"lesson on {batch[0]}",
                             node_id=node.id, edge_id=edge.id, iteration=i, task_id=batch[0])  # fmt: skip
                s.add_lesson(run.id, "general", "uncertain", f"general lesson {i}", node_id=node.id, iteration=i)
                s.start_iteration(run.id, i, i // 50, batch, parent_id=parent, candidate_id=node.id,
                                  decision="accepted" if status == "accepted" else "rejected", step="done")  # fmt: skip
        graph_s = time.perf_counter() - started
        n_train = per_node * 3 // 4
        rows = []
        for node_id in ids:
            for rep, task in enumerate(rng.sample(TRAIN_TASKS, n_train) + rng.sample(DEV_TASKS, per_node - n_train)):
                passed = rng.random() < 0.5
                rows.append({
                    "run_id": run.id, "node_id": node_id, "task_id": task,
                    "split": "dev" if task.startswith("dev") else "train",
                    "seed": rep, "repetition": 0, "score": float(passed), "passed": passed,
                    "disposition": "success" if passed else "task_failure", "cost": 0.01,
                    "rationale": "" if passed else "wrong answer", "cache_key": f"{node_id}:{task}",
                })  # fmt: skip
        inserted = s.add_rollouts(rows)
    deepest = max(depth, key=lambda n: (depth[n], n))
    return {"graph_s": graph_s, "total_s": time.perf_counter() - started, "rollouts": inserted,
            "deepest": deepest, "depth": depth[deepest]}  # fmt: skip


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of `fn()` over `repeat` runs, in milliseconds (after one warm-up run)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def cli_command() -> list[str]:
    script = Path(sys.executable).parent / "evo-dag"
    return [str(script)] if script.exists() else [sys.executable, "-m", "evodag.cli"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--rollouts-per-node", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", type=Path, help="build in this folder and keep it")
    parser.add_argument("--reuse", action="store_true", help="with --keep: time the DB already there, if any")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="evodag_scale_"))
    path = folder / "evodag.sqlite"
    if not args.reuse:
        path.unlink(missing_ok=True)
    try:
        stats = build(path, args.nodes, args.rollouts_per_node, reuse=args.reuse)
        verb = "reused" if stats.get("reused") else "built"
        print(f"{verb} {args.nodes} nodes, {stats['rollouts']} rollouts in {stats['total_s']:.1f} s "
              f"(graph {stats['graph_s']:.1f} s); deepest node {stats['deepest']} "
              f"at depth {stats['depth']}")  # fmt: skip
        failed = []
        with EvoDAG(path, readonly=True) as s:
            task = TRAIN_TASKS[7]
            queries: dict[str, Callable[[], object]] = {
                "summary": lambda: s.summary(),
                "lineage": lambda: s.lineage(stats["deepest"]),
                "scenario": lambda: s.scenario(task),
                "best": lambda: s.best_node(),
                "lessons": lambda: s.lessons(task_id=task),
                "history_last50": lambda: history(s, last=50),
                "lineage_train_outcomes": lambda: lineage_train_outcomes(s, stats["deepest"]),
            }
            for name, fn in queries.items():
                ms = median_ms(fn, args.repeat)
                print(f"evodag_{name}_ms: {ms:.2f}")
                if ms > QUERY_BUDGET_MS:
                    failed.append(name)
            whole = median_ms(lambda: history(s), max(1, args.repeat // 2))
            print(f"evodag_history_all_ms: {whole:.2f}  ({args.nodes - 1} iterations)")
            view = median_ms(lambda: write_session_view(s, folder / "view.sqlite"), max(1, args.repeat // 2))
            print(f"evodag_session_view_ms: {view:.2f}  (the session view, written before each LLM session)")
        cmd = [*cli_command(), "summary", "--json", "--db", str(path)]
        cli_times, cli_cpu = [], []
        for _ in range(max(3, args.repeat // 2)):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            cli_times.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        cli_s = statistics.median(cli_times)
        print(f"evodag_cli_summary_s: {cli_s:.3f}")
        print(
            f"evodag_cli_summary_cpu_s: {statistics.median(cli_cpu):.3f}  (user+sys of the process; wall time "
            f"above also counts waiting for a busy CPU)"
        )
        if cli_s > CLI_BUDGET_S:
            failed.append("cli_summary")
        if failed:
            print(f"over budget: {', '.join(failed)}", file=sys.stderr, flush=True)
        return 1 if failed else 0
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

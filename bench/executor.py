"""Executor bench: N rollouts in-process, then isolated with 1 and 2 local workers, in each sandbox.

    python bench/executor.py [--benchmark opsdesk] [--harness harness_templates/opsdesk] [--rollouts 200]
                             [--sandbox all|auto|bwrap|landlock|none] [--mode fork|spawn]

Prints, for the default sandbox (`auto`, i.e. the strongest this machine has), `executor_speedup_2w: <x>` (wall time
1 worker / 2 workers) and `executor_overhead_ms: <x>` (per-rollout wall cost of isolation over an in-process
`benchmark.run`, measured with 1 worker), rollouts/s for each mode and whether every mode agrees on every score;
with `--sandbox all` (the default) the same figures for each sandbox available here, suffixed `_<sandbox>`
(`executor_overhead_ms_bwrap: ...`), so that the cost of isolation stays visible. Modes run interleaved `--trials`
times (fork servers warm after the first); the best time of each counts, so that load from other processes skews
them least. Any `module:Class` benchmark spec works too (e.g. `--benchmark fake_benchmarks:FakeBenchmark
--harness <dir with policy.txt>` with `tests/` on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from saddler.benchmark import RolloutResult, Task, load_benchmark
from saddler.config import ExecutorConfig
from saddler.errors import ExecutorError
from saddler.executor.base import RolloutJob, rollout_cache_key
from saddler.executor.local import LocalExecutor
from saddler.executor.sandbox import resolve_sandbox

ROOT = Path(__file__).resolve().parents[1]


def plan(tasks: list[Task], n: int) -> list[tuple[Task, int]]:
    """The first `n` (task, seed) pairs, seeds 0, 1, 2, ... over all tasks."""
    pairs = ((task, seed) for seed in itertools.count() for task in tasks)
    return list(itertools.islice(pairs, n))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="opsdesk")
    parser.add_argument("--harness", default=str(ROOT / "harness_templates" / "opsdesk"))
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--split", default="train")
    parser.add_argument("--mode", choices=["fork", "spawn"], default="fork", help="isolation mode")
    parser.add_argument("--sandbox", choices=["all", "auto", "bwrap", "landlock", "none"], default="all")
    parser.add_argument("--trials", type=int, default=3, help="interleaved repetitions; the best time counts")
    args = parser.parse_args()

    default = resolve_sandbox(ExecutorConfig()).mode
    if args.sandbox == "all":
        sandboxes = [s for s in ("bwrap", "landlock", "none") if _available(s)]
    else:
        sandboxes = [default if args.sandbox == "auto" else args.sandbox]
    bench = load_benchmark(args.benchmark, {})
    work = Path(tempfile.mkdtemp(prefix="saddler-bench-executor-"))
    try:
        harness = work / "harness"
        shutil.copytree(args.harness, harness)
        pairs = plan(bench.tasks(args.split), args.rollouts)
        bfp, mfp = bench.fingerprint(), bench.model_fingerprint()

        def jobs(tag: str) -> list[RolloutJob]:
            return [
                RolloutJob(
                    benchmark=args.benchmark,
                    benchmark_options={},
                    harness_dir=str(harness),
                    commit="bench",
                    tree="bench",
                    task=task,
                    split=args.split,
                    seed=seed,
                    repetition=0,
                    trace_dir=str(work / tag / f"s{seed}"),
                    cache_key=rollout_cache_key("bench", task.id, args.split, seed, 0, bfp, mfp),
                )
                for task, seed in pairs
            ]

        inproc: dict[str, RolloutResult] = {}
        outcomes: dict[tuple[str, int], dict[str, RolloutResult]] = {}
        executors = {
            (box, w): LocalExecutor(ExecutorConfig.model_validate({"workers": w, "sandbox": box}), args.mode)
            for box in sandboxes
            for w in (1, 2)
        }
        best: dict[str, float] = {}
        for trial in range(args.trials):  # interleaved, best of N: other load on the machine hits every mode
            start = time.perf_counter()
            for job in jobs(f"inproc{trial}"):
                Path(job.trace_dir).mkdir(parents=True, exist_ok=True)
                inproc[job.cache_key] = bench.run(harness, job.task, job.seed, Path(job.trace_dir))
            best["inproc"] = min(best.get("inproc", float("inf")), time.perf_counter() - start)
            for (box, workers), executor in executors.items():
                got = outcomes.setdefault((box, workers), {})

                def keep(job: RolloutJob, result: RolloutResult, got: dict[str, RolloutResult] = got) -> None:
                    got[job.cache_key] = result

                start = time.perf_counter()
                executor.run(jobs(f"{box}-w{workers}-{trial}"), keep)
                key = f"{box}-{workers}w"
                best[key] = min(best.get(key, float("inf")), time.perf_counter() - start)
        for executor in executors.values():
            executor.close()

        n, t_inproc = len(pairs), best["inproc"]
        agree = all(
            (got[k].score, got[k].passed) == (r.score, r.passed) for got in outcomes.values() for k, r in inproc.items()
        )
        print(f"executor_loadavg_1m: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} cpus; other load skews the speedup)")
        print(f"executor_benchmark: {args.benchmark}")
        print(f"executor_isolation: {args.mode}")
        print(f"executor_sandbox_default: {default}")
        print(f"executor_sandboxes: {','.join(sandboxes)}")
        print(f"executor_rollouts: {n}")
        print(f"executor_trials: {args.trials} (best time of each mode)")
        print(f"executor_inprocess_ms: {t_inproc / n * 1000:.2f}")
        print(f"executor_rps_inprocess: {n / t_inproc:.1f}")
        print(f"executor_results_match: {str(agree).lower()}")
        headline = default if default in sandboxes else sandboxes[0]
        for box in sandboxes:
            one, two = best[f"{box}-1w"], best[f"{box}-2w"]
            figures = {
                "dispositions_2w": ",".join(sorted({r.disposition for r in outcomes[(box, 2)].values()})),
                "rps_1w": f"{n / one:.1f}",
                "rps_2w": f"{n / two:.1f}",
                "speedup_2w": f"{one / two:.2f}",
                "overhead_ms": f"{(one - t_inproc) / n * 1000:.2f}",
            }
            for name, value in figures.items():
                if box == headline:
                    print(f"executor_{name}: {value}")
                print(f"executor_{name}_{box}: {value}")
        return 0 if agree else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _available(sandbox: str) -> bool:
    try:
        return resolve_sandbox(ExecutorConfig.model_validate({"sandbox": sandbox})).mode == sandbox
    except ExecutorError:
        return False


if __name__ == "__main__":
    sys.exit(main())

"""What one Harbor job per batch costs beyond the trials themselves: a 20-trial batch of ~2 s trials.

    python bench/harbor_overhead.py [--harbor PATH] [--workers 2] [--trials 20] [--sleep 2]

Runs real Harbor (`--harbor`, default `$SADDLER_TEST_HARBOR`, else `harbor` on PATH) on copies of the test task
(tests/fixtures/harbor) with the test agent working `--sleep` seconds, in the bundled bubblewrap environment,
through `HarborBenchmark.run_batch` (the path an evaluation takes). A trial's own duration is Harbor's
`finished_at - started_at` (sandbox start, agent, verifier). Prints grep-able lines:

    harbor_trials, harbor_workers, harbor_wall_s, harbor_trial_mean_s
    harbor_overhead_per_trial_s  (wall - sum of trial durations / workers) / trials
    harbor_overhead_ratio        harbor_overhead_per_trial_s / harbor_trial_mean_s (target <= 0.10)
    harbor_cli_start_s           `harbor --version`: the interpreter and CLI start every job pays
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harbor import HarborBenchmark  # noqa: E402
from saddler.benchmark import Batch, BatchRollout, RolloutResult, Task  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "harbor"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--harbor", default=os.environ.get("SADDLER_TEST_HARBOR") or "harbor")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--sleep", type=float, default=2.0)
    args = parser.parse_args()
    if shutil.which(args.harbor) is None:
        print(f"no harbor CLI at {args.harbor}: pass --harbor or set SADDLER_TEST_HARBOR", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="harbor-bench-") as tmp:
        root = Path(tmp)
        names = [f"task-{i:02d}" for i in range(max(1, args.trials // 2))]
        for name in names:
            shutil.copytree(FIXTURES / "tasks" / "hello", root / "tasks" / name)
        shutil.copytree(FIXTURES / "harness", root / "harness")
        (root / "harness" / "behaviour.txt").write_text(f"sleep:{args.sleep:g}\n")
        bench = HarborBenchmark(agent_import_path="agent:Agent", path=str(root / "tasks"), env="bwrap",
                                harbor=args.harbor, tasks={"train": names, "dev": [], "test": []})  # fmt: skip
        seeds = [1, 2][: 2 if args.trials > 1 else 1]
        rollouts = [BatchRollout(Task(n, n, "train"), s, r, root / "traces" / f"{n}-{r}") for n in names
                    for r, s in enumerate(seeds)][: args.trials]  # fmt: skip
        results: list[RolloutResult] = []
        batch = Batch(root / "harness", tuple(rollouts), root / "batch", args.workers, dict(os.environ), 600.0)
        started = time.perf_counter()
        bench.run_batch(batch, lambda _rollout, result: results.append(result))
        wall = time.perf_counter() - started
        cli = time.perf_counter()
        subprocess.run([args.harbor, "--version"], capture_output=True, check=False)
        cli_start = time.perf_counter() - cli
        if os.environ.get("KEEP"):
            shutil.copytree(root, os.environ["KEEP"], dirs_exist_ok=True)
    bad = [r for r in results if r.disposition != "success"]
    if bad or len(results) != len(rollouts):
        print(f"{len(bad)} of {len(results)} trials did not pass: {bad[:1]}", file=sys.stderr)
        return 1
    trial_total = sum(r.duration_s for r in results)
    mean = trial_total / len(results)
    per_trial = (wall - trial_total / args.workers) / len(results)
    print(f"harbor_trials: {len(results)}")
    print(f"harbor_workers: {args.workers}")
    print(f"harbor_wall_s: {wall:.2f}")
    print(f"harbor_trial_mean_s: {mean:.2f}")
    print(f"harbor_overhead_per_trial_s: {per_trial:.3f}")
    print(f"harbor_overhead_ratio: {per_trial / mean:.3f}")
    print(f"harbor_cli_start_s: {cli_start:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

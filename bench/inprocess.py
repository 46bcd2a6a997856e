"""Rollouts in the bench's own process, for the strategies bench only (`bench/strategies.py --in-process`).

The product runs every rollout in an isolated child (harness code is untrusted: an LLM wrote it). In the bench the
proposer is the offline backend, whose harnesses are the bundled templates plus bank patches (code shipped with
the benchmark), and the benchmarks are pure-Python simulations that load each harness's modules under names no
other harness shares (`benchmarks.simharness.load_module`). There a child per rollout buys nothing but its cost: a
fork, a copy of the harness, a compile in a fresh interpreter, a result file (about 10 ms against the simulation's
few ms). `install()` makes `saddler.run.context` build `InProcessExecutor` instead; a rollout gives the same result
either way (same benchmark code, harness tree, task and seed), which `tests/bench/test_inprocess.py` checks against
the isolated executor.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Sequence

from saddler.benchmark import Benchmark, RolloutResult, load_benchmark
from saddler.config import ExecutorConfig
from saddler.executor.base import RolloutJob
from saddler.executor.child import run_job
from saddler.ports import ResultCallback

ALLOWED = ("opsdesk", "repofix")  # simulations whose harness code the offline bank writes: safe in this process


class InProcessExecutor:
    """The `Executor` contract, one job after another in this process, in the order given. A rollout that raises
    (a defect of the simulation, not of the harness: the runners turn harness faults into failed results) becomes
    an `infra_error` result with the traceback's tail, as an isolated child's crash would."""

    runs_here = True  # the pool computes its rollouts on its own thread (`saddler.schedule.pool`)

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config
        self._benches: dict[str, Benchmark] = {}

    def _bench(self, job: RolloutJob) -> Benchmark:
        if job.benchmark not in ALLOWED:
            raise ValueError(f"in-process rollouts are for the offline simulations {ALLOWED}, not {job.benchmark!r}")
        key = f"{job.benchmark}{sorted(job.benchmark_options.items())}"
        if key not in self._benches:
            self._benches[key] = load_benchmark(job.benchmark, job.benchmark_options)
        return self._benches[key]

    def run(self, jobs: Sequence[RolloutJob], on_result: ResultCallback) -> None:
        for job in jobs:
            on_result(job, self._one(job))

    def _one(self, job: RolloutJob) -> RolloutResult:
        bench = self._bench(job)
        try:
            return run_job(json.loads(job.to_json()), bench)  # the job exactly as an isolated child reads it
        except Exception:
            tail = traceback.format_exc()[-2000:]
            return RolloutResult(task_id=job.task.id, score=0.0, passed=False, disposition="infra_error",
                                 error_tail=tail)  # fmt: skip

    def close(self) -> None:
        self._benches.clear()


def install() -> None:
    """From now on, runs started in this process evaluate in it (`saddler.run.context.make_executor`)."""
    import saddler.run.context as context

    context.make_executor = InProcessExecutor

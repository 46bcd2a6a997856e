"""Rollout child entry point:
`python -m saddler.executor.child JOB_FILE RESULT_FILE [--memory-mb N] [--landlock DIR [--network]]`.

Reads one `RolloutJob` as JSON (from JOB_FILE, or stdin when it is `-`), arranges to die with the thread
that started it, becomes the subreaper of its descendants, confines itself with Landlock to writing DIR
when asked, applies its own memory limit (RLIMIT_AS) before importing the benchmark, runs the rollout, kills
whatever the rollout left running, and writes the `RolloutResult` JSON to RESULT_FILE (stdout when `-`).
Exit codes: 0 result written, 3 out of memory, 1 any other crash (the traceback goes to stderr, which the
parent keeps the tail of).
Import-light on purpose: stdlib, `saddler.benchmark` and the benchmark module only.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from saddler.benchmark import Benchmark, RolloutResult, Task, load_benchmark
from saddler.procs import become_subreaper, die_with_parent, kill_descendants

EXIT_OOM = 3


def set_memory_limit(memory_mb: int) -> None:
    """Cap this process's address space (inherited by everything it starts)."""
    limit = memory_mb * 1024 * 1024
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def run_job(job: dict[str, Any], bench: Benchmark | None = None) -> RolloutResult:
    """Run one decoded job dict in this process and return its result (duration filled in if unset).
    `bench` is the already-built benchmark (the fork server's); built from the job when None."""
    if bench is None:
        bench = load_benchmark(job["benchmark"], job.get("benchmark_options") or {})
    task = Task(**job["task"])
    trace_dir = Path(job["trace_dir"])
    trace_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result = bench.run(Path(job["harness_dir"]), task, int(job["seed"]), trace_dir)
    if not isinstance(result, RolloutResult):
        raise TypeError(
            f"{type(bench).__name__}.run() returned {type(result).__name__} {str(result)[:200]}: it must return a "
            "saddler.benchmark.RolloutResult(task_id, score, passed, disposition, ...) (see the README)"
        )
    if not result.duration_s:
        result.duration_s = time.perf_counter() - start
    return result


def main(argv: list[str]) -> int:
    args = list(argv)
    memory_mb, confine_to = 0, ""
    network = "--network" in args
    if network:
        args.remove("--network")
    for flag in ("--memory-mb", "--landlock"):
        if flag in args:
            i = args.index(flag)
            if flag == "--memory-mb":
                memory_mb = int(args[i + 1])
            else:
                confine_to = args[i + 1]
            del args[i : i + 2]
    if len(args) != 2:
        sys.stderr.write(
            "usage: python -m saddler.executor.child JOB_FILE|- RESULT_FILE|- [--memory-mb N] [--landlock DIR]\n"
        )
        return 2
    job_src, result_dst = args
    die_with_parent()
    become_subreaper()
    if confine_to:
        from saddler.executor import landlock

        landlock.confine(confine_to, network=network)
    if memory_mb:
        set_memory_limit(memory_mb)
    text = sys.stdin.read() if job_src == "-" else Path(job_src).read_text(encoding="utf-8")
    try:
        result = run_job(json.loads(text))
    except MemoryError:
        sys.stderr.write(f"MemoryError: the rollout exceeded the executor memory limit ({memory_mb} MiB)\n")
        return EXIT_OOM
    finally:
        kill_descendants(os.getpid())  # whatever the rollout left running dies with it
    payload = json.dumps(result.to_dict())
    if result_dst == "-":
        sys.stdout.write(payload)
    else:
        tmp = Path(result_dst + ".tmp")
        tmp.write_text(payload, encoding="utf-8")
        tmp.replace(result_dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

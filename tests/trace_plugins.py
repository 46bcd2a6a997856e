"""Benchmarks for the per-rollout trace folder tests; importable by rollout children (tests/ on PYTHONPATH).

`ClobberProbe` writes `trace.json` (a fixed name, as a plugin written from the README would) into its
`trace_dir`, waits until `parties` rollouts have written theirs (a file barrier in `barrier_dir`), then
reads its trace back and passes only when the file still holds its own rollout: with a trace folder
shared between parallel rollouts, the others overwrite it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from saddler.benchmark import RolloutResult, Task

SPEC = "trace_plugins:ClobberProbe"


class ClobberProbe:
    name = "clobber-probe"

    def __init__(self, barrier_dir: str, parties: int = 2, n_tasks: int = 4) -> None:
        self.barrier_dir, self.parties, self.n_tasks = Path(barrier_dir), parties, n_tasks

    def tasks(self, split: str) -> list[Task]:
        return [Task(id=f"probe/{split}-{i}", group=f"g{i}", split=split) for i in range(self.n_tasks)]

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        me = {"task": task.id, "seed": seed}
        trace = Path(trace_dir) / "trace.json"
        trace.write_text(json.dumps(me))
        self.barrier_dir.mkdir(parents=True, exist_ok=True)
        (self.barrier_dir / f"{task.id.replace('/', '_')}-{seed}").touch()
        deadline = time.monotonic() + 5.0
        while len(list(self.barrier_dir.iterdir())) < self.parties and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # let the other rollout of this round write too
        ok = json.loads(trace.read_text()) == me
        return RolloutResult(task.id, float(ok), ok, "success" if ok else "task_failure", trace_path=str(trace))

"""opsdesk: the bundled offline benchmark — a SIMULATED office assistant in twelve universes.

`OpsdeskBenchmark` implements `saddler.benchmark.Benchmark`. Rollouts import only the stdlib,
`benchmarks.opsdesk` and `saddler.benchmark`, so a child process starts fast.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # imports stay lazy: a rollout child imports this package and must start fast
if TYPE_CHECKING:
    from pathlib import Path

    from saddler.benchmark import BankPatch, RolloutNeeds, RolloutResult, Symptom, Task

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_SOURCES = ("env.py", "world.py", "tasks.py", "grader.py", "session.py", "runner.py", "sdk.py")
MODEL_SOURCES = ("agent.py", "plans.py")
SPLITS = ("train", "dev", "test")


def __getattr__(name: str) -> Path:
    if name == "TEMPLATE_DIR":  # the baseline harness, as a Path (pathlib is imported only when asked)
        from pathlib import Path

        return Path(HERE).parent.parent / "harness_templates" / "opsdesk"
    raise AttributeError(name)


def _digest(names: tuple[str, ...]) -> str:
    import hashlib

    h = hashlib.sha256()
    for name in names:
        h.update(name.encode())
        with open(os.path.join(HERE, name), "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:16]


class OpsdeskBenchmark:
    """The bundled offline benchmark: a SIMULATED office assistant in twelve universes.

    `noise` scales the simulated agent's mistake rates and transient faults.
    """

    name = "opsdesk"
    trace_format = (
        "JSON lines, one event per line with a `type` (thought, tool_call/tool_result, tool_error, reminder, "
        "verify, finish, stop, grade, …); the last line is the grader's verdict with the failed checks."
    )
    score_kind = "pass_rate"
    metric = None

    def __init__(self, *, noise: float = 1.0) -> None:
        if noise < 0:
            raise ValueError("noise must be >= 0 (1.0 is the calibrated default)")
        self.noise = float(noise)

    def tasks(self, split: str) -> list[Task]:
        """The split's tasks in a fixed order (groups are held out: a group belongs to one split)."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
        from benchmarks.opsdesk.tasks import all_specs

        return [s.task() for s in all_specs() if s.split == split]

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        from benchmarks.opsdesk.runner import run_rollout
        from benchmarks.opsdesk.tasks import spec_by_id

        return run_rollout(harness_dir, spec_by_id(task.id), seed, trace_dir, self.noise)

    def fingerprint(self) -> str:
        return _digest(BENCH_SOURCES) + f"-n{self.noise:g}"

    def model_fingerprint(self) -> str:
        return _digest(MODEL_SOURCES)

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        """Failure signatures of a failed rollout, read from its trace ([] when passed or no trace)."""
        from benchmarks.opsdesk.symptoms import extract, read_trace

        if result.passed or not result.trace_path or not os.path.isfile(result.trace_path):
            return []
        return extract(read_trace(result.trace_path))

    def patch_bank(self) -> list[BankPatch]:
        from benchmarks.opsdesk.bank import load_bank

        return load_bank()

    def check(self) -> list[str]:
        """Nothing to install: opsdesk is pure Python and offline."""
        return []

    def rollout_needs(self) -> RolloutNeeds:
        """Nothing: a simulation, no network, no key."""
        from saddler.benchmark import RolloutNeeds

        return RolloutNeeds()


__all__ = ["TEMPLATE_DIR", "OpsdeskBenchmark"]

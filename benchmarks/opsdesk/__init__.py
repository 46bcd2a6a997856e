"""opsdesk: the bundled offline benchmark — a SIMULATED office assistant in twelve universes.

`OpsdeskBenchmark` implements `saddler.benchmark.Benchmark`. Rollouts import only the stdlib,
`benchmarks.opsdesk` and `saddler.benchmark`, so a child process starts fast.
"""

from __future__ import annotations

import os

from benchmarks.simkit import SimBenchmark

TYPE_CHECKING = False  # imports stay lazy: a rollout child imports this package and must start fast
if TYPE_CHECKING:
    from pathlib import Path


HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_SOURCES = (
    "env.py", "world.py", "world_data.py", "tasks.py", "grader.py", "session.py", "runner.py", "sdk.py",
    "../simkit.py", "../simharness.py", "../simwatch.py", "../simmodel.py",
)  # fmt: skip
MODEL_SOURCES = ("agent.py", "plans.py", "../simmodel.py")


def __getattr__(name: str) -> Path:
    if name == "TEMPLATE_DIR":  # the baseline harness, as a Path (pathlib is imported only when asked)
        from pathlib import Path

        return Path(HERE).parent.parent / "harness_templates" / "opsdesk"
    raise AttributeError(name)


class OpsdeskBenchmark(SimBenchmark):
    """The bundled offline benchmark: a SIMULATED office assistant in twelve universes.

    `noise` scales the simulated agent's mistake rates and transient faults.
    """

    name = "opsdesk"
    trace_format = (
        "JSON lines, one event per line with a `type` (thought, tool_call/tool_result, tool_error, reminder, "
        "verify, finish, stop, grade, …); the last line is the grader's verdict with the failed checks."
    )
    package = "benchmarks.opsdesk"
    here = HERE
    bench_sources = BENCH_SOURCES
    model_sources = MODEL_SOURCES
    audit_params = ("answer", "email", "emails", "title", "subject", "total", "message", "names", "start_utc")


__all__ = ["TEMPLATE_DIR", "OpsdeskBenchmark"]

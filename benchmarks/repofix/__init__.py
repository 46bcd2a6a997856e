"""repofix: the second bundled offline benchmark — a SIMULATED coding agent fixing bugs in twelve repositories.

`RepofixBenchmark` implements `saddler.benchmark.Benchmark`. Rollouts import only the stdlib,
`benchmarks.repofix`, `benchmarks.simkit`, `benchmarks.simharness`, `benchmarks.simwatch` and `saddler.benchmark`,
so a child process starts fast.
"""

from __future__ import annotations

import os

from benchmarks.simkit import SimBenchmark

TYPE_CHECKING = False  # imports stay lazy: a rollout child imports this package and must start fast
if TYPE_CHECKING:
    from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_SOURCES = (
    "repos.py", "bugs.py", "tasks.py", "analysis.py", "behaviour.py", "env.py", "tests_log.py", "scripts.py",
    "grader.py", "session.py", "runner.py", "sdk.py", "../simkit.py", "../simharness.py", "../simwatch.py",
    "../simmodel.py",
)  # fmt: skip
MODEL_SOURCES = ("agent.py", "plans.py", "verify.py", "../simmodel.py")


def __getattr__(name: str) -> Path:
    if name == "TEMPLATE_DIR":  # the baseline harness, as a Path (pathlib is imported only when asked)
        from pathlib import Path

        return Path(HERE).parent.parent / "harness_templates" / "repofix"
    raise AttributeError(name)


class RepofixBenchmark(SimBenchmark):
    """The second bundled offline benchmark: a SIMULATED coding agent fixing bugs in twelve repositories.

    `noise` scales the simulated model's mistake rates.
    """

    name = "repofix"
    trace_format = (
        "JSON lines, one event per line with a `type` (assistant, tool_call/tool_result, tool_error, op = a "
        "sandbox command with its outcome, thought, loop_message, reminder, condense, submit, stop, grade, …); "
        "the last line is the grader's verdict with the failed fail-to-pass / pass-to-pass checks."
    )
    package = "benchmarks.repofix"
    here = HERE
    bench_sources = BENCH_SOURCES
    model_sources = MODEL_SOURCES
    audit_params = ("sites.fixed", "f2p")  # the expected fix and the hidden fail-to-pass tests' names


__all__ = ["TEMPLATE_DIR", "RepofixBenchmark"]

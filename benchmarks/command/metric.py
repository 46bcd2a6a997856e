"""Running an eval command and reading its metric (shared by the `command` benchmark and fleet mode).

The metric is group 1 of `metric_regex` (multiline) when given, else the output's single number (or the last
line that is a number). A non-zero exit, a timeout or no metric is a crash: `metric` None, never an exception.
`SADDLER_BENCH_SEED` carries a fresh seed per timed run, so a harness cannot memoise fixed inputs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from saddler.procs import run_process_group

SEED_VARIABLE = "SADDLER_BENCH_SEED"
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


@dataclass
class EvalRun:
    """One eval command run: its metric (None on crash), exit code, output and duration."""

    metric: float | None
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    error: str = ""


def extract_metric(output: str, metric_regex: str = "") -> float | None:
    """The metric in `output` (see the module docstring), or None."""
    if metric_regex:
        match = re.search(metric_regex, output, re.MULTILINE)
        if match is None:
            return None
        try:
            return float(match.group(1) if match.groups() else match.group(0))
        except ValueError:
            return None
    for line in reversed(output.strip().splitlines()):
        if _NUMBER.match(line.strip()):
            return float(line.strip())
    return None


def run_eval(
    command: str,
    cwd: Path,
    seed: int,
    metric_regex: str = "",
    timeout_s: float = 600.0,
    extra_env: dict[str, str] | None = None,
) -> EvalRun:
    """Run `command` through the shell in `cwd` with stdin closed, its own process group and a timeout."""
    env = {**os.environ, SEED_VARIABLE: str(seed), **(extra_env or {})}
    run = run_process_group(command, shell=True, cwd=cwd, env=env, timeout_s=timeout_s)
    out, err, duration = run.stdout, run.stderr, run.duration_s
    if run.timed_out:
        return EvalRun(None, None, out, err, duration, f"timeout after {timeout_s:g}s")
    if run.returncode != 0:
        return EvalRun(None, run.returncode, out, err, duration, f"exit {run.returncode}: {err.strip()[-300:]}")
    metric = extract_metric(out, metric_regex)
    error = "" if metric is not None else ("no match for metric_regex" if metric_regex else "no number in the output")
    return EvalRun(metric, 0, out, err, duration, error)

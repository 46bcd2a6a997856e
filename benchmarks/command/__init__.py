"""command: any eval command that prints a metric (`eval_command` + `metric_regex`, the 002 seed's contract).

Options: `eval_command` (required), `metric_regex` (group 1; empty = the output's single number),
`metric_direction` (minimize | maximize), `timeout_s`, `score_min` / `score_max` (the metric range mapped
linearly onto the 0..1 score, direction-aware; without them the score is 1/(1+m) when minimizing and
m/(1+m) when maximizing, for m >= 0), `pass_threshold` (score at or above it passes; default: any run
that produced a metric passes). One task per split (`metric-train`, `metric-dev`, `metric-test`): the
same command, each rollout with a fresh `SADDLER_BENCH_SEED`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from benchmarks.command.metric import EvalRun, extract_metric, improved, run_eval
from saddler.benchmark import BankPatch, RolloutResult, Symptom, Task
from saddler.errors import ConfigError

__all__ = ["CommandBenchmark", "EvalRun", "extract_metric", "improved", "run_eval"]


class CommandBenchmark:
    """The `command` benchmark (see the module docstring)."""

    name = "command"

    def __init__(
        self,
        eval_command: str = "",
        metric_regex: str = "",
        metric_direction: str = "minimize",
        timeout_s: float = 600.0,
        score_min: float | None = None,
        score_max: float | None = None,
        pass_threshold: float | None = None,
    ) -> None:
        if not eval_command.strip():
            raise ConfigError('the command benchmark needs benchmark_options.eval_command (e.g. "python3 eval.py")')
        if metric_direction not in ("minimize", "maximize"):
            raise ConfigError(f"metric_direction must be minimize or maximize, not {metric_direction!r}")
        self.eval_command, self.metric_regex, self.direction = eval_command, metric_regex, metric_direction
        self.timeout_s, self.score_min, self.score_max = timeout_s, score_min, score_max
        self.pass_threshold = pass_threshold

    def tasks(self, split: str) -> list[Task]:
        return [Task(f"metric-{split}", f"metric-{split}", split, "metric", self.eval_command)]

    def score(self, metric: float) -> float:
        """The metric mapped onto 0..1, higher is better."""
        if self.score_min is not None and self.score_max is not None and self.score_max > self.score_min:
            frac = (metric - self.score_min) / (self.score_max - self.score_min)
            frac = 1.0 - frac if self.direction == "minimize" else frac
        else:
            m = max(metric, 0.0)
            frac = 1.0 / (1.0 + m) if self.direction == "minimize" else m / (1.0 + m)
        return min(1.0, max(0.0, frac))

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        result = run_eval(self.eval_command, Path(harness_dir), seed, self.metric_regex, self.timeout_s)
        trace_dir = Path(trace_dir)
        trace_dir.mkdir(parents=True, exist_ok=True)
        trace = trace_dir / "trace.json"
        trace.write_text(
            json.dumps(
                {
                    "command": self.eval_command,
                    "seed": seed,
                    "metric": result.metric,
                    "returncode": result.returncode,
                    "stdout": result.stdout[-20000:],
                    "stderr": result.stderr[-20000:],
                },
                indent=2,
            ),
            encoding="utf-8",
        )
        if result.metric is None:
            disposition = "timeout" if result.returncode is None else "task_failure"
            return RolloutResult(
                task.id,
                0.0,
                False,
                disposition,
                duration_s=result.duration_s,
                trace_path=str(trace),
                error_tail=result.error,
                rationale=result.error,
            )
        score = self.score(result.metric)
        passed = self.pass_threshold is None or score >= self.pass_threshold
        return RolloutResult(
            task.id,
            score,
            passed,
            "success" if passed else "task_failure",
            duration_s=result.duration_s,
            trace_path=str(trace),
            rationale=f"metric {result.metric:g} ({self.direction})",
        )

    def fingerprint(self) -> str:
        text = f"{self.eval_command}\0{self.metric_regex}\0{self.direction}\0{self.score_min}\0{self.score_max}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def model_fingerprint(self) -> str:
        return "none"

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        if result.disposition in ("task_failure", "timeout") and result.error_tail:
            return [Symptom("eval_crash", result.task_id, None, result.error_tail)]
        return []

    def patch_bank(self) -> list[BankPatch]:
        return []

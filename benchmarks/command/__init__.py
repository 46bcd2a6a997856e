"""command: any eval command that prints a metric (`eval_command` + `metric_regex`, the 002 seed's contract).

Options (`[run.benchmark_options]`):

- `eval_command` (required): run through the shell in the candidate's harness checkout; exit 0 and print the metric.
- `metric_direction` (required): `maximize` or `minimize`, which way is better. `saddler init --from-fleet`
  takes it from fleet.json's `problem.metric_direction` (the seed's default there is `minimize`).
- `metric_regex`: group 1 is the metric (multiline); empty: the output's single number (or last numeric line).
- `metric_name`: how reports name it; default: the identifier the regex starts with (`p99_latency_ms` for
  `^p99_latency_ms:\\s*([0-9.]+)`), else `metric`.
- `metric_unit`: its unit (`ms`, `%`), shown after every value of it; default none.
- `score_min` / `score_max`: a bounded metric's range (e.g. 0 and 1 for accuracy): the score is then the metric
  mapped linearly onto 0..1 (direction-aware) and clamps outside. Without them the score is a strictly
  monotonic map of any real metric (`saddler.benchmark.MetricScale`): ranking and acceptance on the score
  are ranking and acceptance on the metric itself.
- `pass_threshold` (optional, in the metric's own unit): a run passes when its metric is at least it
  (maximize) or at most it (minimize). Without it every run that produced a metric passes. Passing only
  feeds task-level regressions and reflection; selection uses the metric.
- `timeout_s` (default 600).

One task per split (`metric-train`, `metric-dev`, `metric-test`): the same command, each rollout with a fresh
`SADDLER_BENCH_SEED`. The per-task score is `mean_score` (the metric), and reports show the metric.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from benchmarks.command.metric import EvalRun, extract_metric, run_eval
from saddler.benchmark import BankPatch, BenchmarkBase, MetricScale, RolloutResult, Symptom, Task
from saddler.errors import ConfigError

__all__ = ["CommandBenchmark", "EvalRun", "extract_metric", "metric_name_of", "run_eval"]

DIRECTIONS = ("maximize", "minimize")


def metric_name_of(metric_regex: str) -> str:
    """The identifier a metric regex starts with (`^p99_latency_ms:` -> `p99_latency_ms`), else `metric`."""
    found = re.match(r"\^?\s*([A-Za-z_][A-Za-z0-9_.-]*)", metric_regex or "")
    return found.group(1) if found else "metric"


class CommandBenchmark(BenchmarkBase):
    """Any eval command that prints a metric (`eval_command` + `metric_regex`, the 002 seed's contract).

    Its options and behaviour: the module docstring.
    """

    name = "command"
    score_kind = "mean_score"
    trace_format = (
        "one JSON object (trace.json in the rollout's folder): `command`, `seed`, `metric` (null when none was "
        "read), `returncode`, and the tails of `stdout` and `stderr` of the eval command."
    )

    def __init__(
        self,
        eval_command: str = "",
        metric_regex: str = "",
        metric_direction: str = "",
        timeout_s: float = 600.0,
        score_min: float | None = None,
        score_max: float | None = None,
        pass_threshold: float | None = None,
        metric_name: str = "",
        metric_unit: str = "",
    ) -> None:
        if not eval_command.strip():
            raise ConfigError('the command benchmark needs benchmark_options.eval_command (e.g. "python3 eval.py")')
        if not metric_direction:
            raise ConfigError(
                'the command benchmark needs benchmark_options.metric_direction = "maximize" or "minimize": '
                "which way your metric gets better (accuracy: maximize; latency, loss: minimize)"
            )
        if metric_direction not in DIRECTIONS:
            raise ConfigError(f"metric_direction must be maximize or minimize, not {metric_direction!r}")
        if (score_min is None) != (score_max is None) or (
            score_min is not None and score_max is not None and score_max <= score_min
        ):
            raise ConfigError("score_min and score_max go together, with score_min < score_max (the metric's range)")
        self.eval_command, self.metric_regex, self.direction = eval_command, metric_regex, metric_direction
        self.timeout_s, self.score_min, self.score_max = timeout_s, score_min, score_max
        self.pass_threshold = pass_threshold
        self.metric: MetricScale = MetricScale(
            metric_name or metric_name_of(metric_regex), metric_direction, score_min, score_max, metric_unit
        )

    def tasks(self, split: str) -> list[Task]:
        return [Task(f"metric-{split}", f"metric-{split}", split, "metric", self.eval_command)]

    def score(self, metric: float) -> float:
        """The metric mapped onto 0..1, higher is better (strictly monotonic unless a range clamps it)."""
        return self.metric.score(metric)

    def passes(self, metric: float) -> bool:
        """At or beyond `pass_threshold` in the metric's direction; any metric passes without a threshold."""
        if self.pass_threshold is None:
            return True
        return metric >= self.pass_threshold if self.direction == "maximize" else metric <= self.pass_threshold

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        result = run_eval(self.eval_command, Path(harness_dir), seed, self.metric_regex, self.timeout_s)
        trace_dir = Path(trace_dir)
        trace_dir.mkdir(parents=True, exist_ok=True)
        trace = trace_dir / "trace.json"
        record = {
            "command": self.eval_command,
            "seed": seed,
            "metric": result.metric,
            "returncode": result.returncode,
            "stdout": result.stdout[-20000:],
            "stderr": result.stderr[-20000:],
        }
        trace.write_text(json.dumps(record, indent=2), encoding="utf-8")
        if result.metric is None:
            disposition = "timeout" if result.returncode is None else "task_failure"
            return RolloutResult(
                task.id, 0.0, False, disposition, duration_s=result.duration_s, trace_path=str(trace),
                error_tail=result.error or "no metric", rationale=result.error or "no metric",
            )  # fmt: skip
        passed = self.passes(result.metric)
        why = f"{self.metric.name} {result.metric!r} ({self.direction})"
        if not passed:
            why += f": misses pass_threshold {self.pass_threshold!r}"
        return RolloutResult(
            task.id, self.score(result.metric), passed, "success" if passed else "task_failure",
            duration_s=result.duration_s, trace_path=str(trace), rationale=why,
        )  # fmt: skip

    def fingerprint(self) -> str:
        text = "\0".join(
            str(x) for x in (self.eval_command, self.metric_regex, self.direction, self.score_min, self.score_max,
                             self.pass_threshold, "metric-scale-2")
        )  # fmt: skip
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def model_fingerprint(self) -> str:
        return "none"

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        if result.disposition in ("task_failure", "timeout") and result.error_tail:
            return [Symptom("eval_crash", result.task_id, None, result.error_tail)]
        return []

    def patch_bank(self) -> list[BankPatch]:
        return []

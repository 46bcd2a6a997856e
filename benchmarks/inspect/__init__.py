"""inspect: an Inspect AI task as the benchmark, the candidate's solver (agent) code as the harness.

Needs the extra: `pip install 'saddler[inspect]'` (inspect-ai). Options (`[run.benchmark_options]`):

- `task` (required): an Inspect task, `/abs/path/tasks.py@name` (or `/abs/path/tasks.py` holding one task), or a
  registry name of an installed package (`inspect_evals/gsm8k`). The task's dataset and scorer are the benchmark;
  its solver is replaced by the harness's. `task_args`: keyword arguments of the task function.
- `model` (required): the task model, e.g. `anthropic/claude-sonnet-4-5`, or `mockllm/model` offline
  (`mock_outputs`: the mock's replies in turn, cycled: a string is a message, `{tool = "...", arguments = {...}}`
  a tool call; no tokenizer download). `model_args`: passed to `get_model`.
- `solver` (default `agent.py@agent`): `file@factory` in the harness; the factory (an Inspect `@solver` or
  `@agent`, called with `solver_args`) builds the solver each rollout uses. The harness folder is importable.
- `scorer`: the score to read when the task has several (default: the first); its value goes through Inspect's
  `value_to_float` (C=1, P=0.5, I=0). `pass_threshold` (default 1.0): a rollout passes at or above it.
- Splits: a sample's `metadata[split_field]` (default `split`: train | dev | test, `validation`/`val` = dev);
  samples without it are assigned by a seeded hash of their group (`metadata[group_field]`, default the sample
  id) with `split_ratios` (default [0.6, 0.2, 0.2]), so a group never straddles splits.
- `message_limit`, `token_limit`, `time_limit`: Inspect's per-sample limits.

A rollout evaluates one sample with the candidate's solver at the given seed (`GenerateConfig.seed`) and
returns its score; its trace folder holds the Inspect log (`*.eval`) and `transcript.md`, the text the diagnosis
reads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

from saddler.benchmark import BenchmarkBase, RolloutNeeds, RolloutResult, Task, model_needs
from saddler.errors import ConfigError

INSTALL_HINT = "the inspect benchmark needs inspect-ai: pip install 'saddler[inspect]'"


def inspect_installed() -> bool:
    """True when inspect-ai can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec("inspect_ai") is not None
    except (ImportError, ValueError):
        return False


class InspectBenchmark(BenchmarkBase):
    """An Inspect AI task as the benchmark, the candidate's solver (agent) code as the harness.

    Its options and behaviour: the module docstring.
    """

    name = "inspect"
    score_kind = "mean_score"
    trace_format = (
        "transcript.md (markdown): the sample's input and target, every message of the run (system, user, "
        "assistant with its tool calls, tool results), the final output, each scorer's value, answer and "
        "explanation, and the error with its traceback if the solver raised. The full Inspect log (`*.eval`, "
        "open it with `inspect view` or `inspect_ai.log.read_eval_log`) is in the same folder."
    )

    def __init__(
        self,
        task: str = "",
        model: str = "",
        solver: str = "agent.py@agent",
        task_args: dict[str, Any] | None = None,
        model_args: dict[str, Any] | None = None,
        solver_args: dict[str, Any] | None = None,
        scorer: str = "",
        pass_threshold: float = 1.0,
        split_field: str = "split",
        group_field: str = "",
        split_ratios: list[float] | None = None,
        message_limit: int | None = None,
        token_limit: int | None = None,
        time_limit: float | None = None,
        mock_outputs: list[str | dict[str, Any]] | None = None,
    ) -> None:
        if not inspect_installed():
            raise ConfigError(INSTALL_HINT)
        if not task.strip():
            raise ConfigError(
                'the inspect benchmark needs benchmark_options.task: "/abs/path/tasks.py@my_task" or a registry '
                'name such as "inspect_evals/gsm8k"'
            )
        if not model.strip():
            raise ConfigError(
                'the inspect benchmark needs benchmark_options.model, e.g. "anthropic/claude-sonnet-4-5" '
                '(or "mockllm/model" to try it offline)'
            )
        file, _, _ = task.partition("@")
        if file.endswith(".py"):
            path = Path(file).expanduser()
            if not path.is_absolute():
                raise ConfigError(
                    f"benchmark_options.task {task!r}: give the task file as an absolute path (rollouts run in "
                    "other folders)"
                )
            task = str(path) + task[len(file) :]
        if "@" not in solver or not solver.partition("@")[0].endswith(".py"):
            raise ConfigError(f"benchmark_options.solver {solver!r}: expected FILE.py@factory, e.g. agent.py@agent")
        if not isinstance(mock_outputs or [], list) or not all(
            isinstance(m, str) or (isinstance(m, dict) and "tool" in m) for m in mock_outputs or []
        ):
            raise ConfigError(
                "benchmark_options.mock_outputs: a list of replies, each a string or a table "
                '{tool = "name", arguments = {...}}'
            )
        ratios = list(split_ratios or [0.6, 0.2, 0.2])
        if len(ratios) != 3 or any(r < 0 for r in ratios) or sum(ratios) <= 0:
            raise ConfigError("benchmark_options.split_ratios: three non-negative numbers for train, dev, test")
        self.task, self.model, self.solver = task, model, solver
        self.task_args, self.model_args, self.solver_args = (
            dict(task_args or {}),
            dict(model_args or {}),
            dict(solver_args or {}),
        )
        self.scorer, self.pass_threshold = scorer, float(pass_threshold)
        self.split_field, self.group_field, self.split_ratios = split_field, group_field, ratios
        self.limits = {"message_limit": message_limit, "token_limit": token_limit, "time_limit": time_limit}
        self.mock_outputs = list(mock_outputs or [])
        self._tasks: dict[str, list[Task]] | None = None

    def tasks(self, split: str) -> list[Task]:
        from benchmarks.inspect.dataset import split_tasks

        if self._tasks is None:
            self._tasks = split_tasks(self)
        return list(self._tasks.get(split, []))

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        from benchmarks.inspect.rollout import run_sample

        return run_sample(self, Path(harness_dir), task, seed, Path(trace_dir))

    def warm(self) -> None:
        """Called once in a rollout fork server: one tiny offline eval imports everything `eval()` needs (about
        350 modules, seconds), so every forked rollout starts warm."""
        from benchmarks.inspect.rollout import warm_up

        warm_up()

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        options = {"task": self.task, "task_args": self.task_args, "scorer": self.scorer,
                   "pass_threshold": self.pass_threshold, "split": [self.split_field, self.group_field,
                   self.split_ratios], "limits": self.limits, "solver": self.solver}  # fmt: skip
        h.update(json.dumps(options, sort_keys=True, default=str).encode())
        file = self.task.partition("@")[0]
        if file.endswith(".py") and Path(file).is_file():
            h.update(Path(file).read_bytes())
        h.update(_inspect_version().encode())
        return h.hexdigest()[:16]

    def model_fingerprint(self) -> str:
        raw = json.dumps([self.model, self.model_args, self.mock_outputs], sort_keys=True, default=str)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    def check(self) -> list[str]:
        """What is missing here: the task file (inspect-ai itself: the constructor refuses without it)."""
        problems: list[str] = []  # inspect-ai itself: __init__ refuses to build without it
        file = self.task.partition("@")[0]
        if file.endswith(".py") and not Path(file).is_file():
            problems.append(f"benchmark_options.task: no such file {file}")
        return problems  # the model's key and the network: `rollout_needs`, which the doctor checks

    def rollout_needs(self) -> RolloutNeeds:
        """The task model is called from each rollout: the network, its provider's key and base URL variables."""
        return model_needs(self.model)


def _inspect_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("inspect-ai")
    except PackageNotFoundError:
        return "absent"


__all__ = ["InspectBenchmark", "inspect_installed"]

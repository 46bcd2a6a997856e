"""harbor: Harbor trials (Terminal-Bench 2.0 and other Harbor datasets) of the candidate agent.

Needs the `harbor` CLI (`pip install 'saddler[harbor]'` on Python >= 3.12, or `uv tool install harbor`; tested
with Harbor 0.26.0) and a sandbox Harbor can use: Docker locally, a cloud provider (`env = "daytona"`, `"modal"`,
`"e2b"`, …) whose key is in the rollout environment (`executor.env_allow`), or `env = "bwrap"`, the bundled
bubblewrap environment (`benchmarks/harbor/environments/saddler_bwrap.py`: no Docker; the task's Dockerfile is
not built). Options (`[run.benchmark_options]`):

- `dataset` (`terminal-bench@2.0`, passed as `-d`) or `path` (a local task or dataset folder, `-p`): one of them.
- `tasks`: `{train = [...], dev = [...], test = [...]}`, the task names of each split. With a local `path` it may
  be left out: every task folder (one holding task.toml) is assigned by a seeded hash of its name with
  `split_ratios` (default [0.6, 0.2, 0.2]).
- `agent_import_path` (required): `module:Class` of the agent in the harness (the harness folder is put on
  PYTHONPATH, so the candidate's own agent code runs). `agent_kwargs` (the agent's kwargs), `model`.
- `env` (default `docker`), `harbor` (the CLI, default `harbor`), `timeout_multiplier`, `extra_args`.
- `reward_key` (default `reward`) and `pass_threshold` (default 1.0): the verifier reward read as the score.

An evaluation batch is one Harbor job (`benchmarks/harbor/job.py`): every task and repetition, `-n` from
`executor.workers`, each trial stored as it lands. A trial's result is read by `benchmarks/harbor/trial.py`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from saddler.benchmark import (
    SPLITS,
    Batch,
    BatchRollout,
    BenchmarkBase,
    RolloutNeeds,
    RolloutResult,
    Task,
    hashed_split,
    model_needs,
)
from saddler.errors import ConfigError

MISSING_CLI = (
    "the harbor CLI was not found on PATH: install it (pip install 'saddler[harbor]' on Python >= 3.12, or "
    "uv tool install harbor) and make sure PATH is in executor.env_allow; Harbor also needs Docker or a cloud "
    "sandbox (benchmark_options.env)"
)


SANDBOX_KEYS = {"daytona": ("DAYTONA_API_KEY",), "e2b": ("E2B_API_KEY",), "runloop": ("RUNLOOP_API_KEY",)}


class HarborBenchmark(BenchmarkBase):
    """Harbor trials (Terminal-Bench 2.0 and other Harbor datasets) of the candidate agent.

    Its options and behaviour: the module docstring.
    """

    name = "harbor"
    score_kind = "pass_rate"
    trace_format = (
        "transcript.md (markdown) summarizes the Harbor trial: the command, the verifier reward, any exception "
        "with its traceback, the agent's trajectory steps (ATIF: messages, tool calls, observations) and the tail "
        "of the verifier's test output. The raw trial folder (`jobs/<job>/<trial>/`: result.json, agent/, "
        "verifier/, trial.log) is next to it."
    )

    def __init__(
        self,
        agent_import_path: str = "",
        dataset: str = "",
        path: str = "",
        tasks: dict[str, list[str]] | None = None,
        model: str = "",
        agent_kwargs: dict[str, Any] | None = None,
        env: str = "docker",
        harbor: str = "harbor",
        timeout_multiplier: float | None = None,
        extra_args: list[str] | None = None,
        reward_key: str = "reward",
        pass_threshold: float = 1.0,
        split_ratios: list[float] | None = None,
    ) -> None:
        if ":" not in agent_import_path:
            raise ConfigError(
                'the harbor benchmark needs benchmark_options.agent_import_path = "module:Class" (the agent in '
                "your harness, importable from its root)"
            )
        if bool(dataset) == bool(path):
            raise ConfigError(
                'the harbor benchmark needs exactly one of benchmark_options.dataset (e.g. "terminal-bench@2.0") '
                "or benchmark_options.path (a local task or dataset folder)"
            )
        if path and not Path(path).expanduser().is_absolute():
            raise ConfigError(f"benchmark_options.path {path!r}: give an absolute path (rollouts run elsewhere)")
        if tasks is None and not path:
            raise ConfigError(
                "benchmark_options.tasks = {train = [...], dev = [...], test = [...]} is needed with a registry "
                "dataset: saddler cannot list a dataset's tasks without running Harbor"
            )
        if tasks is not None and (set(tasks) - set(SPLITS) or not all(isinstance(v, list) for v in tasks.values())):
            raise ConfigError("benchmark_options.tasks: a table with lists train, dev, test of task names")
        self.agent_import_path, self.dataset = agent_import_path, dataset
        self.path = str(Path(path).expanduser()) if path else ""
        self.task_names = {s: [str(t) for t in (tasks or {}).get(s, [])] for s in SPLITS} if tasks else None
        self.model, self.agent_kwargs, self.env, self.harbor = model, dict(agent_kwargs or {}), env, harbor
        self.timeout_multiplier, self.extra_args = timeout_multiplier, [str(a) for a in extra_args or []]
        self.reward_key, self.pass_threshold = reward_key, float(pass_threshold)
        self.split_ratios = list(split_ratios or [0.6, 0.2, 0.2])

    def tasks(self, split: str) -> list[Task]:
        names = self.task_names if self.task_names is not None else self._local_splits()
        return [Task(name, name, split, "", name) for name in names.get(split, [])]

    def _local_splits(self) -> dict[str, list[str]]:
        root = Path(self.path)
        if (root / "task.toml").is_file():
            folders = [root]
        else:
            folders = sorted(p for p in root.iterdir() if (p / "task.toml").is_file()) if root.is_dir() else []
        out: dict[str, list[str]] = {s: [] for s in SPLITS}
        for folder in folders:
            out[hashed_split(folder.name, self.split_ratios)].append(folder.name)
        return out

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        """One trial as a job of its own (the executor's path; `run_batch` is the one an evaluation takes)."""
        results: list[RolloutResult] = []
        rollout = BatchRollout(task, seed, 0, Path(trace_dir))
        batch = Batch(Path(harness_dir), (rollout,), Path(trace_dir), 1, dict(os.environ), 24 * 3600.0)
        self.run_batch(batch, lambda _rollout, result: results.append(result))
        return results[0]

    def run_batch(self, batch: Batch, on_result: Callable[[BatchRollout, RolloutResult], None]) -> None:
        """The batch as Harbor jobs, each trial's result handed on as it lands (`benchmarks/harbor/job.py`)."""
        from benchmarks.harbor.job import run_batch

        run_batch(self, batch, on_result)

    def fingerprint(self) -> str:
        options = {k: v for k, v in vars(self).items() if k not in ("model", "agent_kwargs")}
        h = hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]

    def model_fingerprint(self) -> str:
        raw = json.dumps([self.model, self.agent_kwargs], sort_keys=True, default=str)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    def rollout_needs(self) -> RolloutNeeds:
        """The variables Harbor's job needs from the rollout environment: the model's key and base URL, and a cloud
        sandbox's key. Harbor's jobs run outside the rollout sandbox (its own sandboxes hold the trials), so
        `executor.network` does not apply to them."""
        model = model_needs(self.model) if self.model else RolloutNeeds()
        sandbox = SANDBOX_KEYS.get(self.env, ())
        why = f"Harbor's job ({self.model or 'no model'}, env {self.env})"
        return RolloutNeeds(False, (*model.env, *sandbox), model.optional_env, why)

    def check(self) -> list[str]:
        """What is missing to run Harbor trials here: the CLI, the local dataset, Docker's daemon for `env =
        docker` (`harbor run` exits 1 before making any job without it), bubblewrap for `env = bwrap`."""
        problems = [] if shutil.which(self.harbor) else [MISSING_CLI]
        if self.path and not Path(self.path).exists():
            problems.append(f"benchmark_options.path: no such folder {self.path}")
        if self.env == "docker":
            problems += _docker_problems()
        if self.env == "bwrap" and shutil.which("bwrap") is None:
            problems.append("env = bwrap but bwrap is not on PATH: apt-get install bubblewrap")
        return problems


def _docker_problems() -> list[str]:
    if shutil.which("docker") is None:
        return ["env = docker but no docker CLI on PATH: install Docker, or use a cloud sandbox (env)"]
    try:
        probe = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"env = docker but `docker info` failed ({exc}): start Docker, or use a cloud sandbox or bwrap (env)"]
    if probe.returncode != 0:
        return ["env = docker but the Docker daemon is not running (`docker info` failed): start Docker, or use a "
                'cloud sandbox or env = "bwrap"']  # fmt: skip
    return []


__all__ = ["MISSING_CLI", "HarborBenchmark"]

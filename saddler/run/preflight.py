"""The checks of a run config's `[run]`, made before a run folder is created, validated or run, so nothing is
created or spent on a config that cannot work. Every problem is one line `run.dotted.path: what is wrong (what to do)`.

- `check_run`: `[run]` beyond its types: the benchmark imports and accepts its options (asked from its
  constructor's signature) and builds; the batch fits its train split; the backend and prompt templates exist;
  Ray is installed when asked for.

A harness's checks are `saddler.run.harness_check`; a whole folder's (what `saddler validate` prints and what
`saddler run` refuses to start with) are `saddler.run.folder_check`.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
from pathlib import Path
from typing import Any

from saddler.benchmark import (
    SPLITS,
    Benchmark,
    Task,
    benchmark_target,
    complete,
    is_known_benchmark,
    registered_benchmarks,
)
from saddler.config import RunConfig
from saddler.errors import SaddlerError, UnknownNameError
from saddler.executor.environment import rollout_gaps
from saddler.sessions.prompts import TEMPLATES
from saddler.sessions.registry import BACKENDS


def module_available(name: str) -> bool:
    """True when `import name` would find the module (without importing it)."""
    return importlib.util.find_spec(name) is not None


# -- [run] ------------------------------------------------------------------------------------------------


def check_run(cfg: RunConfig, run_dir: Path | None, *, ask_tasks: bool = True) -> tuple[list[str], Benchmark | None]:
    """Problems of a validated `[run]` (dotted paths under `run.`) and the benchmark built from it (None when
    it cannot be built). Prompt files are looked up relative to `run_dir` (skipped when None). With `ask_tasks`
    the benchmark's `tasks()` is called for every split and what it returns checked (`init` cannot: a template's
    task file may be inside the harness clone it has not made yet)."""
    errors: list[str] = []
    bench, bench_errors = _benchmark(cfg.benchmark, cfg.benchmark_options)
    errors += bench_errors
    explicit = cfg.policies.sampler != "full" and "batch_size" in cfg.loop.model_fields_set
    train = None
    if bench is not None and ask_tasks:
        train = _task_errors(bench, errors)
    elif bench is not None and explicit:
        try:
            train = len(bench.tasks("train"))
        except (SaddlerError, ValueError, OSError) as exc:
            errors.append(f"run.benchmark: cannot list its train tasks: {exc}")
    if bench is not None:
        gaps = rollout_gaps(bench.rollout_needs(), cfg.executor, os.environ)
        errors += [f"run.executor.{key}: {why}" for key, why in gaps if key != "env"]  # env: the doctor's
    if train is not None and explicit and cfg.loop.batch_size > train:
        errors.append(
            f"run.loop.batch_size: {cfg.loop.batch_size} is more than the benchmark's {train} train task(s); use "
            f"at most {train}"
        )
    if cfg.sessions.backend not in BACKENDS:
        errors.append(f"run.sessions.backend: {UnknownNameError('backend', cfg.sessions.backend, list(BACKENDS))}")
    for role, path in cfg.sessions.prompts.items():
        if role not in TEMPLATES:
            errors.append(f"run.sessions.prompts.{role}: unknown prompt template; known: {', '.join(TEMPLATES)}")
        elif run_dir is not None and not _resolve(path, run_dir).is_file():
            errors.append(f"run.sessions.prompts.{role}: no such file {_resolve(path, run_dir)}")
    if cfg.executor.kind == "ray" and not module_available("ray"):
        errors.append(
            "run.executor.kind: ray is not installed; pip install 'saddler[ray]' or set executor.kind = \"local\""
        )
    return errors, bench


def _task_errors(bench: Benchmark, errors: list[str]) -> int | None:
    """Call the benchmark's `tasks(split)` for every split as the run will, and check what comes back: a list of
    `Task`s of that split. Appends what is wrong to `errors`; returns the number of train tasks (None: unknown)."""
    train = None
    for split in SPLITS:
        try:
            tasks = bench.tasks(split)
        except Exception as exc:  # the plugin's own code: say what it raised, not a traceback
            errors.append(f"run.benchmark: tasks({split!r}) raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(tasks, list | tuple):
            errors.append(f"run.benchmark: tasks({split!r}) returned {type(tasks).__name__}, not a list of Task")
            continue
        wrong = [t for t in tasks if not isinstance(t, Task)]
        if wrong:
            errors.append(
                f"run.benchmark: tasks({split!r}) returned {type(wrong[0]).__name__} {str(wrong[0])[:80]!r}, not a "
                f"saddler.benchmark.Task: return Task(id=..., group=..., split={split!r}) for each task"
            )
            continue
        other = [t.id for t in tasks if t.split != split]
        if other:
            errors.append(f"run.benchmark: tasks({split!r}) returned tasks of another split: {', '.join(other[:5])}")
        if split == "train":
            train = len(tasks)
    return train


def _resolve(path: str, base: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def _benchmark(name: str, options: dict[str, Any]) -> tuple[Benchmark | None, list[str]]:
    if not is_known_benchmark(name):
        known = [*registered_benchmarks(), "package.module:Class"]
        return None, [f"run.benchmark: {UnknownNameError('benchmark', name, known)}"]
    module_name, _, attr = benchmark_target(name).partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        return None, [f"run.benchmark: cannot import {name!r}: {exc}; install it or fix the module path"]
    except AttributeError:
        return None, [f"run.benchmark: module {module_name!r} has no {attr!r}; fix the class name"]
    problems = _option_errors(name, cls, options)
    if problems:
        return None, problems
    try:
        return complete(cls(**options)), []
    except (SaddlerError, TypeError, ValueError, OSError) as exc:
        return None, [f"run.benchmark_options: benchmark {name!r} refuses its options: {exc}"]


def _option_errors(name: str, cls: type, options: dict[str, Any]) -> list[str]:
    """Unknown and missing options, by the benchmark constructor's own signature."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    named = {k: p for k, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    accepted = ", ".join(named) or "none"
    errors = [
        f"run.benchmark_options.{key}: not an option of benchmark {name!r} (accepted: {accepted})"
        for key in options
        if key not in named
    ]
    errors += [
        f"run.benchmark_options.{key}: required by benchmark {name!r}"
        for key, p in named.items()
        if p.default is inspect.Parameter.empty and key not in options
    ]
    return errors

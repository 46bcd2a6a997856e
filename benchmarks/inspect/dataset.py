"""Loading the Inspect task a benchmark names, and its samples as saddler tasks split by group.

A task spec is `/abs/path/file.py@name`, `/abs/path/file.py` (the file's one task) or a registry name of an
installed package (`inspect_evals/gsm8k`). Sample ids are the samples' own (`str(id)`), else their 1-based
position. A sample's split is `metadata[split_field]` when it says train/dev/test (`validation`/`val` = dev),
else a seeded hash of its group assigns it with the configured ratios; a group found in two splits is an error.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saddler.benchmark import SPLITS, Task, hashed_split
from saddler.errors import ConfigError

if TYPE_CHECKING:
    from inspect_ai import Task as InspectTask
    from inspect_ai.dataset import Sample

    from benchmarks.inspect import InspectBenchmark

SPLIT_ALIASES = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}


def load_inspect_task(spec: str, task_args: dict[str, Any]) -> InspectTask:
    """A fresh Inspect `Task` built from `spec` with `task_args` (`ConfigError` when it cannot be found)."""
    from inspect_ai import Task as InspectTask

    file, _, name = spec.partition("@")
    if file.endswith(".py"):
        module = _import_file(Path(file))
        factories = [getattr(module, name)] if name and hasattr(module, name) else []
        if not name:
            factories = [v for v in vars(module).values() if callable(v) and _is_task_factory(v)]
        if len(factories) != 1:
            found = sorted(k for k, v in vars(module).items() if callable(v) and _is_task_factory(v))
            raise ConfigError(f"benchmark_options.task {spec!r}: name one task with @NAME; tasks in the file: {found}")
        task = factories[0](**task_args)
    else:
        from inspect_ai._eval.loader import load_tasks  # the registry lookup `inspect eval NAME` uses

        try:
            loaded = load_tasks([spec], task_args)
        except Exception as exc:  # Inspect raises various errors for an unknown name
            raise ConfigError(f"benchmark_options.task {spec!r}: Inspect cannot load it: {exc}") from exc
        if len(loaded) != 1:
            raise ConfigError(f"benchmark_options.task {spec!r} names {len(loaded)} tasks; name exactly one")
        task = loaded[0]
    if not isinstance(task, InspectTask):
        raise ConfigError(f"benchmark_options.task {spec!r} did not build an inspect_ai Task")
    return task


def _is_task_factory(obj: Any) -> bool:
    from inspect_ai._util.registry import is_registry_object, registry_info

    return bool(is_registry_object(obj) and registry_info(obj).type == "task")


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise ConfigError(f"benchmark_options.task: no such file {path}")
    name = "saddler_inspect_task_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))  # the task file's own helper modules
    spec.loader.exec_module(module)
    return module


def sample_id(sample: Sample, index: int) -> str:
    """The saddler task id of a sample: its own id, else its 1-based position."""
    return str(sample.id) if sample.id is not None else str(index + 1)


def find_sample(task: InspectTask, wanted: str) -> Sample | None:
    for index, sample in enumerate(task.dataset):
        if sample_id(sample, index) == wanted:
            return sample
    return None


def split_tasks(bench: InspectBenchmark) -> dict[str, list[Task]]:
    """The Inspect task's samples as saddler tasks per split (dataset order within a split)."""
    task = load_inspect_task(bench.task, bench.task_args)
    out: dict[str, list[Task]] = {s: [] for s in SPLITS}
    group_split: dict[str, str] = {}
    for index, sample in enumerate(task.dataset):
        meta = sample.metadata or {}
        tid = sample_id(sample, index)
        group = str(meta.get(bench.group_field, tid)) if bench.group_field else tid
        declared = SPLIT_ALIASES.get(str(meta.get(bench.split_field, "")).lower())
        split = declared or hashed_split(group, bench.split_ratios)
        if group_split.setdefault(group, split) != split:
            raise ConfigError(
                f"inspect task {bench.task}: group {group!r} has samples in {group_split[group]} and {split}; "
                "splits are held out by group"
            )
        prompt = sample.input if isinstance(sample.input, str) else " ".join(m.text for m in sample.input)
        out[split].append(Task(tid, group, split, str(meta.get("family", "")), prompt[:2000]))
    return out

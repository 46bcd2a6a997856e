"""How a rollout's result becomes a stored row: its trace folder, a result that breaks the contract turned into data,
and the machine's faults told apart from the candidate's (`saddler.run.evaluate` stores them)."""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

from evodag.models import DISPOSITIONS
from saddler.benchmark import RolloutResult
from saddler.run.folder import RunPaths

DISK_FULL = ("No space left on device", "Disk quota exceeded", "[Errno 28]")
"""What an infra error's tail says when the disk was full: the machine's fault, not the candidate's."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=@-]+")


def rollout_trace_dir(run_dir: Path, node_id: int, split: str, task_id: str, repetition: int, seed: int) -> Path:
    """The trace folder of one rollout: `<trace root>/n<node>/<split>/<task>-r<rep>-s<seed>`, the trace root being
    `run_dir/traces` for train and `run_dir/heldout` for dev and test (`RunPaths.trace_root`). A task id that is
    not safe as one path component has anything but letters, digits and `._+=@-` replaced by `_` and a short
    digest of the id appended, so two ids never share a folder."""
    safe = _UNSAFE.sub("_", task_id).strip(".") or "task"
    if safe != task_id:
        safe += "~" + hashlib.sha256(task_id.encode()).hexdigest()[:8]
    return RunPaths(Path(run_dir)).trace_root(split) / f"n{node_id}" / split / f"{safe}-r{repetition}-s{seed}"


def with_trace(result: RolloutResult, trace_dir: Path) -> RolloutResult:
    """Point a result that names no trace at its rollout's trace folder, when the rollout wrote anything there."""
    if not result.trace_path and trace_dir.is_dir() and any(trace_dir.iterdir()):
        result.trace_path = str(trace_dir)
    return result


def sanitize(result: RolloutResult) -> RolloutResult:
    """A result the store accepts: one that breaks the contract (an unknown disposition, a score that is not a
    number, `passed` that is not a bool) becomes an `infra_error` that says what was wrong (its score counts
    nowhere); the score is clamped to 0..1."""
    problems = []
    if result.disposition not in DISPOSITIONS:
        problems.append(f"unknown disposition {result.disposition!r} (one of {', '.join(DISPOSITIONS)})")
    if isinstance(result.score, bool) or not isinstance(result.score, int | float) or not math.isfinite(result.score):
        problems.append(f"score {result.score!r} is not a finite number")
    if not isinstance(result.passed, bool):
        problems.append(f"passed {result.passed!r} is not a bool")
    if problems:
        head = f"[saddler] the benchmark's RolloutResult breaks the contract: {'; '.join(problems)}"
        result.error_tail = f"{head}\n{result.error_tail}"[:2048]
        result.disposition, result.passed, result.score = "infra_error", False, 0.0
    result.score = min(1.0, max(0.0, float(result.score)))
    return result

"""Rollout executors: run rollouts isolated, in parallel, time-limited; local or on Ray.

Keep this module import-light: rollout children import `saddler.executor.child` through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from saddler.config import ExecutorConfig
    from saddler.ports import Executor


def make_executor(config: ExecutorConfig) -> Executor:
    """The executor chosen by `config.kind` (`local` or `ray`); raises `ExecutorError` if it cannot run."""
    if config.kind == "ray":
        from saddler.executor.ray_executor import RayExecutor

        return RayExecutor(config)
    from saddler.executor.local import LocalExecutor

    return LocalExecutor(config)

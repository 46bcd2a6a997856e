"""What harness code may import from the benchmark: the `tool` decorator and the sandbox's error types."""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.repofix.env import ContextWindowExceeded, NotFound, TimeLimitExceeded, ToolError

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any


__all__ = ["ContextWindowExceeded", "NotFound", "TimeLimitExceeded", "ToolError", "tool"]


def tool(name: str, description: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a harness function as a tool: the model picks tools by matching what it wants to do against
    name + description, and passes only the arguments the description names."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn._repofix_tool = (name, description)  # type: ignore[attr-defined]
        return fn

    return mark

"""What harness code may import from the benchmark: the `tool` decorator and the raw API error types."""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.opsdesk.env import ApiError, InvalidRequest, LockedOut, NotFound, RateLimited, TransientError

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any


__all__ = ["ApiError", "InvalidRequest", "LockedOut", "NotFound", "RateLimited", "TransientError", "tool"]


def tool(name: str, description: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a harness function as a tool: the agent picks tools by matching intents to name + description."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn._opsdesk_tool = (name, description)  # type: ignore[attr-defined]
        return fn

    return mark

"""Loading an (untrusted) harness directory and the `Session` object its `loop.run(session)` drives.

Harness layout: `prompts/*.md` (system.md first, then the others sorted: the system prompt),
`tools/*.py` (functions marked with `benchmarks.opsdesk.sdk.tool`), `middleware/*.py` (`after_tool(name,
args, result) -> result`), `hooks/*.py` (`before_finish(state) -> str | None`, `after_tool(state, name,
args, result) -> [(tool, args)]`), `loop.py` (`run(session)`). Modules load under unique names, so
several harnesses can run in one process without sharing state.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from benchmarks.opsdesk import env as env_module
from benchmarks.opsdesk.env import ApiError, Env
from benchmarks.simharness import Harness
from benchmarks.simharness import load_harness as load_sim_harness

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any


MAX_MODEL_STEPS = 80  # a runaway harness loop is cut off here


def load_harness(root: str | os.PathLike[str]) -> Harness:
    """Read prompts and import tools, middleware, hooks and the loop (`simharness.load_harness`)."""
    return load_sim_harness(root, "opsdesk", "_opsdesk_tool", ("before_finish", "after_tool"))


class Action:
    """One model step: a tool call (`kind="tool"`) or a finish (`kind="finish"`)."""

    __slots__ = ("answer", "args", "kind", "tool")

    def __init__(self, kind: str, tool: str = "", args: dict[str, Any] | None = None, answer: str = "") -> None:
        self.kind, self.tool, self.args, self.answer = kind, tool, args if args is not None else {}, answer

    def __repr__(self) -> str:
        return f"Action({self.kind!r}, tool={self.tool!r}, args={self.args!r}, answer={self.answer!r})"


class Session:
    """What the harness loop sees: the model, the tools, middleware, hooks, errors and the trace."""

    errors = env_module

    def __init__(self, harness: Harness, env: Env, agent: Any, log: Callable[[dict[str, Any]], None]) -> None:
        self.env, self.agent, self._log = env, agent, log
        self.tools = {name: spec.fn for name, spec in harness.tools.items()}
        self.tool_specs = harness.tools
        self.middleware = list(harness.middleware)
        self.before_finish_hooks = list(harness.hooks["before_finish"])
        self.after_tool_hooks = list(harness.hooks["after_tool"])
        self.state: dict[str, Any] = {"task": agent.prompt, "calls": []}
        self.answer: str | None = None
        self.stopped = ""
        self.steps = 0
        self._pending: dict[str, Any] | None = None
        self._expect: tuple[str, dict[str, Any]] | None = None
        self._hook_file = next(iter(harness.hook_files.values()), "hooks/")

    def next_action(self) -> Action:
        """Ask the simulated model for its next step (one model call)."""
        self.steps += 1
        if self.steps > MAX_MODEL_STEPS or self.answer is not None:
            return Action("finish", answer=self.answer or "")
        obs, self._pending = self._pending, None
        action: Action = self.agent.next_action(obs)
        self._expect = (action.tool, action.args) if action.kind == "tool" else None
        self._log(
            {
                "type": "assistant",
                "step": self.steps,
                "kind": action.kind,
                "tool": action.tool,
                "args": action.args,
                "answer": action.answer,
            }
        )
        return action

    def invoke(self, name: str, args: dict[str, Any]) -> Any:
        """Run a registered tool against the environment; raw API errors propagate as `errors.ApiError`."""
        spec = self.tool_specs.get(name)
        if spec is None:
            raise env_module.NotFound(f"no tool named {name}")
        self.env.tool = spec.file
        self.state["calls"].append((name, dict(args)))
        call: dict[str, Any] = {"type": "tool_call", "tool": name, "file": spec.file, "args": args}
        if self._expect != (name, args):
            call.update(forced=True, by=self._hook_file)
        self._log(call)
        try:
            result = spec.fn(self.env, **args)
        except ApiError as exc:
            self._log({"type": "tool_error", "tool": name, "file": spec.file, "error": exc.kind, "message": str(exc)})
            raise
        finally:
            self.env.tool = ""
        return result

    def observe(self, result: Any) -> None:
        """Show a (middleware-processed) tool result to the model."""
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        self._log({"type": "tool_result", "chars": len(text), "preview": text[:300], "truncated": "[truncated" in text})
        self._pending = {"ok": True, "result": result}

    def observe_error(self, exc: ApiError) -> None:
        """Show a raw API error to the model."""
        self._pending = {
            "ok": False,
            "error": exc.kind,
            "message": str(exc),
            "retry_after": getattr(exc, "retry_after", 0),
        }

    def remind(self, text: str) -> None:
        self._log({"type": "reminder", "text": text})
        self.agent.remind(text)

    def sleep(self, seconds: float) -> None:
        self.env.sleep(seconds)

    def finish(self, answer: str) -> None:
        self._log({"type": "finish", "answer": answer})
        self.answer = str(answer)

    def stop(self, reason: str) -> None:
        self._log({"type": "stop", "reason": reason})
        self.stopped = reason

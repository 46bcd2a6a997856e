"""Loading an (untrusted) repofix harness and the `Session` its `loop.run(session)` drives.

Harness layout: `prompts/*.md` (the system prompt, system.md first), `tools/*.py` (functions marked with
`benchmarks.repofix.sdk.tool`, called as `fn(workspace, **args)`), `middleware/*.py` (`after_tool(workspace,
name, args, result) -> result`), `hooks/*.py` (`before_submit(state) -> str | None`, `after_tool(state, name,
args, result) -> [(tool, args)]`: calls the loop makes on the model's behalf, whose results the model sees),
`loop.py` (`run(session)`).

The model has a context window for the conversation (the task, its turns, every observation and message; the
system prompt is cached apart): once it is full, the next model call raises `errors.ContextWindowExceeded`,
unless the loop condenses the history in time (`session.condense`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from benchmarks.repofix import env as env_module
from benchmarks.repofix.env import ContextWindowExceeded, ToolError, Workspace
from benchmarks.simharness import Harness
from benchmarks.simharness import load_harness as load_sim_harness

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

MAX_MODEL_STEPS = 150  # a runaway harness loop is cut off here
STEP_S = 12.0  # simulated seconds one model call takes
CONTEXT_WINDOW = 20_000  # characters of conversation the model can hold
TURN_CHARS = 160  # what one model turn (its reasoning and the call) adds to the context
SUMMARY_CHARS = 100  # what a condensed observation still takes


def load_harness(root: str | os.PathLike[str]) -> Harness:
    """Read prompts and import tools, middleware, hooks and the loop (`simharness.load_harness`)."""
    return load_sim_harness(root, "repofix", "_repofix_tool", ("before_submit", "after_tool"))


class Action:
    """One model step: a tool call (`kind="tool"`) or a submission (`kind="submit"`)."""

    __slots__ = ("args", "kind", "summary", "tool")

    def __init__(self, kind: str, tool: str = "", args: dict[str, Any] | None = None, summary: str = "") -> None:
        self.kind, self.tool, self.args, self.summary = kind, tool, args if args is not None else {}, summary

    def __repr__(self) -> str:
        return f"Action({self.kind!r}, tool={self.tool!r}, args={self.args!r}, summary={self.summary!r})"


class Session:
    """What the harness loop sees: the model, the tools, middleware, hooks, the workspace and the trace."""

    errors = env_module

    def __init__(self, harness: Harness, ws: Workspace, agent: Any, log: Callable[[dict[str, Any]], None]) -> None:
        self.workspace, self.agent, self._log = ws, agent, log
        self.tools = {name: spec.fn for name, spec in harness.tools.items()}
        self.tool_specs = harness.tools
        self.middleware = list(harness.middleware)
        self.before_submit_hooks = list(harness.hooks["before_submit"])
        self.after_tool_hooks = list(harness.hooks["after_tool"])
        self.context_limit = CONTEXT_WINDOW
        self.state: dict[str, Any] = {"task": agent.prompt, "calls": [], "edits_since_test": 0, "last_test": None}
        self.summary: str | None = None
        self.stopped = ""
        self.steps = 0
        self._history: list[int] = []
        self._base = len(agent.prompt)  # the conversation: the system prompt is cached apart and not counted
        self._pending: dict[str, Any] | None = None
        self._expect: tuple[str, dict[str, Any]] | None = None
        self._answered = True
        self._own = False  # the tool call running now is the one the model asked for
        self._hook_file = next(iter(harness.hook_files.values()), "hooks/")

    @property
    def context_used(self) -> int:
        """Characters the model's context holds now."""
        return self._base + sum(self._history)

    def next_action(self) -> Action:
        """Ask the model for its next step (one model call, `STEP_S` of sandbox time)."""
        self.steps += 1
        if self.steps > MAX_MODEL_STEPS or self.summary is not None:
            return Action("submit", summary=self.summary or "")
        if self.context_used > self.context_limit:
            self._log({"type": "context_full", "used": self.context_used, "limit": self.context_limit})
            raise ContextWindowExceeded(f"prompt is too long: {self.context_used} > {self.context_limit} characters")
        self.workspace.charge(STEP_S)
        obs, self._pending = self._pending, None
        action: Action = self.agent.next_action(obs)
        self._expect, self._answered = ((action.tool, action.args), False) if action.kind == "tool" else (None, True)
        self._history.append(TURN_CHARS)
        self._log({"type": "assistant", "step": self.steps, "kind": action.kind, "tool": action.tool,
                   "args": action.args, "summary": action.summary, "context": self.context_used})  # fmt: skip
        return action

    def invoke(self, name: str, args: dict[str, Any]) -> Any:
        """Run a registered tool in the workspace; the sandbox's `errors.ToolError`s propagate."""
        spec = self.tool_specs.get(name)
        if spec is None:
            raise env_module.NotFound(f"no tool named {name}")
        ws = self.workspace
        ws.tool = spec.file
        self.state["calls"].append((name, dict(args)))
        own = self._expect == (name, args) and not self._answered
        call: dict[str, Any] = {"type": "tool_call", "tool": name, "file": spec.file, "args": args}
        if not own:
            call.update(forced=True, by=self._hook_file)
        self._log(call)
        self._own = own
        try:
            return spec.fn(ws, **args)
        except ToolError as exc:
            self._log({"type": "tool_error", "tool": name, "file": spec.file, "error": exc.kind, "message": str(exc)})
            raise
        finally:
            ws.tool = ""
            self.state["edits_since_test"] = ws.edits - ws.edits_at_last_run
            if ws.last_run is not None:
                run = ws.last_run
                self.state["last_test"] = {"failed": len(run.failed), "errors": len(run.errors),
                                           "timed_out": run.timed_out}  # fmt: skip

    def _deliver(self, obs: dict[str, Any], chars: int) -> None:
        self._history.append(chars)
        if self._own and not self._answered:
            self._pending, self._answered = obs, True
        else:
            self.agent.notice(obs)
        self._own = False

    def observe(self, result: Any) -> None:
        """Show a (middleware-processed) tool result to the model."""
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        self._log({"type": "tool_result", "chars": len(text), "preview": text[:300], "truncated": "[truncated" in text})
        self._deliver({"ok": True, "text": text}, len(text))

    def observe_error(self, exc: ToolError) -> None:
        """Show a tool's error to the model."""
        self._deliver({"ok": False, "error": exc.kind, "text": str(exc)}, len(str(exc)) + 40)

    def tell(self, text: str) -> None:
        """A message from the loop to the model (a refused submission, an automatic revert, …)."""
        self._log({"type": "loop_message", "text": text})
        self._history.append(len(text))
        self.agent.tell(text)

    def remind(self, text: str) -> None:
        self._log({"type": "reminder", "text": text})
        self._history.append(len(text))
        self.agent.remind(text)

    def condense(self, keep_last: int = 6) -> int:
        """Replace every observation but the last `keep_last` by a one-line summary; returns characters freed.
        The model keeps what it concluded, but forgets details it read in what was condensed."""
        old = self._history[:-keep_last] if keep_last else self._history
        freed = sum(max(0, n - SUMMARY_CHARS) for n in old)
        if not freed:
            return 0
        self._history = [min(n, SUMMARY_CHARS) for n in old] + self._history[len(old) :]
        self._log({"type": "condense", "freed": freed, "kept": keep_last, "context": self.context_used})
        self.agent.forget(len(old))
        return freed

    def submit(self, summary: str) -> None:
        """Hand in the checkout as it is now (after the sandbox's time limit nothing can be handed in)."""
        if self.workspace.clock > env_module.TIME_LIMIT_S:
            self._log({"type": "submit_refused", "reason": "the sandbox's time limit has passed"})
            return
        self._log({"type": "submit", "summary": summary})
        self.summary = str(summary)

    def stop(self, reason: str) -> None:
        self._log({"type": "stop", "reason": reason})
        self.stopped = reason

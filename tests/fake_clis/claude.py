#!/usr/bin/env python3
"""A stand-in for `claude -p` (Claude Code 2.1.332 print mode) for the command backend's and fleet's tests, built
from what the real CLI printed against the loopback model (tests/fixtures/real_clis/claude-*.json, `recorded`) and
from its documentation for the parsing:
- options parsed like commander: `--opt value` / `--opt=value`; variadic `<x...>` options (`--tools`,
  `--allowedTools`, `--disallowedTools`, `--add-dir`, `--mcp-config`) swallow following words up to the next
  option; an unknown option is `error: unknown option '--x'` (exit 1); `--max-turns` and `--system-prompt-file`
  are accepted though `--help` does not list them;
- the prompt is the positional argument or stdin; neither is an error;
- `--tools` is the set of built-in tools the model sees (default: the full set recorded in claude-stream's `init`);
  in `dontAsk` mode a call needs an `--allowedTools` rule (`Read`, `Bash(git diff:*)` prefix, `Bash(exact
  command)`); Read/Glob/Grep need none; `acceptEdits` allows Edit and Write;
- PreToolUse command hooks from `--settings` run through `sh -c` with the hook input on stdin: a printed
  `permissionDecision: deny` (exit 0) or exit 2 blocks the call, any other exit code is a non-blocking error;
- `--output-format json` prints the recorded `result` object (claude-tools); `stream-json --verbose` the recorded
  events (claude-stream: `system/init`, an `assistant` message per tool call and its `user` tool result, the
  final `assistant` text, the `result`);
- `--json-schema`: the model answers through the `StructuredOutput` tool (`structured_output` in the result);
  an answer that does not match the schema ends in `error_max_structured_output_retries` after 5 attempts
  (claude-structured_invalid, exit 1); a model that answers in prose instead is nudged once and its prose is then
  returned as a success without `structured_output` (claude-prose, `FAKE_CLI_MODE=prose`);
- failures are the recorded ones: no key is "Not logged in · Please run /login" (claude-no_key, exit 1),
  `FAKE_CLI_MODE=max_turns` is `error_max_turns` (claude-max_turns), `fail:<case>` replays claude-<case> (400, 401,
  429, 500, 529, usage_limit).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import brain
import recorded

VERSION = "2.1.332 (Claude Code)"
DEFAULT_TOOLS = recorded.events("claude-stream")[0]["tools"]  # what the real CLI offers without --tools
FLAGS = {"-p", "--print", "--verbose", "--no-session-persistence", "--strict-mcp-config", "-h", "--help", "-v",
         "--version", "--include-partial-messages", "--dangerously-skip-permissions", "--bare"}  # fmt: skip
VALUED: dict[str, tuple[str, ...] | None] = {
    "--output-format": ("text", "json", "stream-json"),
    "--input-format": ("text", "stream-json"),
    "--permission-mode": ("acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan"),
    "--effort": ("low", "medium", "high", "xhigh", "max"),
    "--model": None, "--fallback-model": None, "--max-budget-usd": None, "--setting-sources": None,
    "--settings": None, "--system-prompt": None, "--append-system-prompt": None, "--json-schema": None,
    "--session-id": None, "--agents": None, "--name": None,
    "--max-turns": None, "--system-prompt-file": None,  # hidden in --help
}  # fmt: skip
VARIADIC = {"--tools", "--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools", "--add-dir",
            "--mcp-config", "--betas"}  # fmt: skip
HIDDEN = {"--max-turns", "--system-prompt-file"}
READ_ONLY_TOOLS = {"Read", "Glob", "Grep"}


def fail(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


def parse(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    opts: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positional += argv[i:]
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, inline = arg.partition("=")
        if name in FLAGS:
            opts[name] = True
        elif name in VALUED:
            if eq:
                value = inline
            elif i < len(argv):
                value, i = argv[i], i + 1
            else:
                fail(f"error: option '{name} <value>' argument missing")
            choices = VALUED[name]
            if choices and value not in choices:
                fail(f"error: option '{name}' argument '{value}' is invalid. Allowed choices are {', '.join(choices)}.")
            opts[name] = value
        elif name in VARIADIC:
            values = [inline] if eq else []
            while not eq and i < len(argv) and not argv[i].startswith("-"):
                values.append(argv[i])
                i += 1
            if not values:
                fail(f"error: option '{name} <values...>' argument missing")
            opts.setdefault(name, []).extend(values)
        else:
            fail(f"error: unknown option '{name}'")
    return opts, positional


def split_tools(values: list[str]) -> list[str]:
    """Comma- or space-separated tool names and rules; separators inside parentheses belong to the rule."""
    out: list[str] = []
    for value in values:
        depth, current = 0, ""
        for ch in value:
            depth += ch == "("
            depth -= ch == ")"
            if ch in ", " and depth == 0:
                if current:
                    out.append(current)
                current = ""
            else:
                current += ch
        if current:
            out.append(current)
    return out


def rule_allows(rules: list[str], tool: str, tool_input: dict[str, Any]) -> bool:
    for rule in rules:
        if rule == tool:
            return True
        match = re.fullmatch(r"(\w+)\((.*)\)", rule)
        if match and match.group(1) == tool == "Bash":
            pattern, command = match.group(2), str(tool_input.get("command", ""))
            if pattern.endswith(":*"):
                if command == pattern[:-2] or command.startswith(pattern[:-2] + " "):
                    return True
            elif command == pattern:
                return True
    return False


def run_hooks(settings: dict[str, Any], tool: str, tool_input: dict[str, Any]) -> str | None:
    """The reason a PreToolUse hook blocks the call, or None."""
    for entry in settings.get("hooks", {}).get("PreToolUse", []):
        matcher = entry.get("matcher") or ""
        if matcher not in ("", "*") and not re.fullmatch(matcher, tool):
            continue
        for hook in entry.get("hooks", []):
            if hook.get("type") != "command":
                continue
            payload = {"session_id": "fake", "transcript_path": "", "cwd": os.getcwd(),
                       "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input}  # fmt: skip
            proc = subprocess.run(
                ["/bin/sh", "-c", hook["command"]], input=json.dumps(payload), capture_output=True, text=True
            )
            if proc.returncode == 2:
                return proc.stderr.strip() or "blocked by hook"
            if proc.returncode != 0:
                continue  # non-blocking hook error: the call goes ahead
            try:
                out = json.loads(proc.stdout or "{}")
            except json.JSONDecodeError:
                continue
            specific = out.get("hookSpecificOutput") or {}
            if specific.get("permissionDecision") == "deny":
                return str(specific.get("permissionDecisionReason", "denied"))
    return None


class Session:
    def __init__(self, opts: dict[str, Any]) -> None:
        self.tools = split_tools(opts["--tools"]) if "--tools" in opts else list(DEFAULT_TOOLS)
        self.allowed = split_tools(opts.get("--allowedTools", []) + opts.get("--allowed-tools", []))
        self.denied = split_tools(opts.get("--disallowedTools", []) + opts.get("--disallowed-tools", []))
        self.mode = opts.get("--permission-mode", "default")
        raw = opts.get("--settings", "")
        if raw and not raw.lstrip().startswith("{"):
            raw = Path(raw).read_text(encoding="utf-8")
        self.settings = json.loads(raw) if raw else {}
        self.calls: list[dict[str, Any]] = []

    def use(self, tool: str, tool_input: dict[str, Any]) -> str:
        """Attempt one tool call the way Claude Code decides it; returns the outcome."""
        if tool not in self.tools or tool in self.denied:
            outcome = "unavailable"
        elif (reason := run_hooks(self.settings, tool, tool_input)) is not None:
            outcome = f"denied by hook: {reason}"
        elif not self.permitted(tool, tool_input):
            outcome = "denied by permissions"
        else:
            outcome = self.run(tool, tool_input)
        self.calls.append({"tool": tool, "input": tool_input, "outcome": outcome})
        return outcome

    def permitted(self, tool: str, tool_input: dict[str, Any]) -> bool:
        if self.mode == "bypassPermissions" or tool in READ_ONLY_TOOLS:
            return True
        if self.mode == "acceptEdits" and tool in ("Edit", "Write"):
            return True
        return rule_allows(self.allowed, tool, tool_input)

    def run(self, tool: str, tool_input: dict[str, Any]) -> str:
        if tool in ("Edit", "Write"):
            return brain.try_write(Path(tool_input["file_path"]), tool_input.get("content", ""))
        if tool == "Bash":
            proc = subprocess.run(["/bin/sh", "-c", tool_input["command"]], capture_output=True, text=True)
            return f"exit {proc.returncode}"
        return "ok"


def help_text() -> str:
    names = sorted((FLAGS | set(VALUED) | VARIADIC) - HIDDEN)
    return "Usage: claude [options] [command] [prompt]\n\nOptions:\n" + "\n".join(f"  {n}" for n in names)


def result(**fields: Any) -> dict[str, Any]:
    """The real CLI's `result` object (recorded in claude-tools) with `fields` changed."""
    base = json.loads(recorded.load("claude-tools")["stdout"])
    base.update(session_id="fake", duration_ms=10, duration_api_ms=8, total_cost_usd=0.0125, num_turns=3)
    base["usage"] = {**base["usage"], "input_tokens": 1200, "output_tokens": 340}
    base.pop("structured_output", None)
    return {**base, **fields}


def replay(name: str, fields: dict[str, Any] | None = None) -> int:
    """Print recording `name`'s result (with `fields` changed) as the real CLI printed it; its exit code."""
    data = recorded.load(name)
    final = {**json.loads(data["stdout"]), **(fields or {})}
    print(json.dumps(final))
    sys.stderr.write(data["stderr"])
    return int(data["returncode"])


class Stream:
    """`--output-format stream-json --verbose`: the recorded events, one per line as they happen."""

    def __init__(self, on: bool, session: Session, model: str) -> None:
        self.on, self.n = on, 0
        init = recorded.events("claude-stream")[0]
        if on:
            self.emit({**init, "cwd": os.getcwd(), "session_id": "fake", "tools": session.tools, "model": model,
                       "permissionMode": session.mode})  # fmt: skip

    def emit(self, event: dict[str, Any]) -> None:
        if self.on:
            print(json.dumps(event), flush=True)

    def call(self, tool: str, tool_input: dict[str, Any], outcome: str) -> None:
        self.n += 1
        use = {"type": "tool_use", "id": f"toolu_{self.n:04d}", "name": tool, "input": tool_input}
        self.assistant([use])
        self.emit({"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": use["id"], "type": "tool_result", "content": outcome}]}, "session_id": "fake"})  # fmt: skip

    def assistant(self, content: list[dict[str, Any]]) -> None:
        message = {"id": f"msg_{self.n:04d}", "type": "message", "role": "assistant", "content": content,
                   "usage": {"input_tokens": 400, "output_tokens": 1}}  # fmt: skip
        self.emit({"type": "assistant", "message": message, "parent_tool_use_id": None, "session_id": "fake"})


def main(argv: list[str]) -> int:
    opts, positional = parse(argv)
    if opts.get("-v") or opts.get("--version"):
        print(VERSION)
        return 0
    if opts.get("-h") or opts.get("--help"):
        print(help_text())
        return 0
    if not (opts.get("-p") or opts.get("--print")):
        fail("fake claude: only print mode (-p) is supported")
    stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    prompt = "\n".join(p for p in (stdin, " ".join(positional)) if p)
    if not prompt.strip():
        fail("Error: Input must be provided either through stdin or as a prompt argument when using --print")
    if "--system-prompt-file" in opts and not Path(opts["--system-prompt-file"]).is_file():
        fail(f"Error: System prompt file not found: {opts['--system-prompt-file']}")
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("CLAUDE_CODE_OAUTH_TOKEN")):
        return replay("claude-no_key")
    failing = next((m.split(":", 1)[1] for m in brain.mode() if m.startswith("fail:")), None)
    if failing:
        return replay(f"claude-{failing}")
    session = Session(opts)
    stream = Stream(opts.get("--output-format") == "stream-json", session, opts.get("--model", ""))
    plan = brain.plan(prompt, Path.cwd())
    for path, text in plan.edits:
        tool = "Edit" if path.is_file() else "Write"
        tool_input = {"file_path": str(path), "old_string": "", "new_string": text, "content": text}
        stream.call(tool, tool_input, session.use(tool, tool_input))
    for command in plan.commands:
        stream.call("Bash", {"command": command}, session.use("Bash", {"command": command}))
    schema = json.loads(opts["--json-schema"]) if "--json-schema" in opts else None
    brain.record(
        "claude",
        argv,
        prompt,
        [stdin, *positional],
        tools=session.tools,
        calls=session.calls,
        schema=schema is not None,
    )
    if "max_turns" in brain.mode():
        limit = opts.get("--max-turns", "40")
        return replay("claude-max_turns", {"session_id": "fake", "total_cost_usd": 0.5, "num_turns": int(limit) + 1,
                                           "errors": [f"Reached maximum number of turns ({limit})"]})  # fmt: skip
    answer = {} if "invalid" in brain.mode() else plan.answer
    text = brain.text_of(answer)
    if plan.result_file is not None and schema is None:
        session.use("Write", {"file_path": str(plan.result_file), "content": text})
    missing = [k for k in (schema or {}).get("required", []) if k not in answer]
    if schema is not None and "prose" in brain.mode():  # no StructuredOutput: nudged once, then the prose wins
        stream.assistant([{"type": "text", "text": "I looked at the harness."}])
        final = result(result="I looked at the harness.", num_turns=2, stop_reason="end_turn")
    elif schema is not None and missing:  # five StructuredOutput calls the CLI rejected
        error = recorded.events("claude-structured_invalid")[0]["errors"][0].split(" — ")[0]
        why = f"{error} — last StructuredOutput error: root: must have required property '{missing[0]}'"
        return replay("claude-structured_invalid", {"session_id": "fake", "errors": [why]})
    elif schema is not None:
        stream.call("StructuredOutput", answer, "Structured output provided successfully")
        final = result(result=text, structured_output=answer)
    else:
        stream.assistant([{"type": "text", "text": text}])
        final = result(result=text, stop_reason="end_turn")
    if stream.on:
        stream.emit(final)
    else:
        print(json.dumps(final))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

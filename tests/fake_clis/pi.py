#!/usr/bin/env python3
"""A stand-in for the `pi` coding agent (pi-coding-agent 0.73.1) for saddler's tests, built from what the real CLI
printed against the loopback model (tests/fixtures/real_clis/pi-*.json, `recorded`) and from its CLI reference
(`docs/cli.md`, `docs/json.md`) for the parsing:
- options from the CLI reference (long and short forms); an unknown option is refused (exit 1);
- `@path` arguments include a file in the first prompt, other arguments are messages, a piped stdin is
  prepended; `--` ends option parsing;
- `--tools` is an allowlist of built-in tools (default read, bash, edit, write); `--thinking` takes off, minimal,
  low, medium, high, xhigh or max;
- pi has **no sandbox**: its write and bash tools reach whatever the process may write (so confinement is
  visible only when something like bubblewrap wraps it);
- `--mode json` prints the recorded JSONL events (pi-tools): `session`, `agent_start`, per turn `turn_start`,
  `message_start`/`message_end` (the assistant's message with its tool calls, usage and cost), per tool call
  `tool_execution_start`/`_end` and the `toolResult` message, `turn_end`; then `agent_end`. The answer is the
  final assistant text;
- failures are the recorded ones: without the provider's key pi prints its `session` line, "No API key found for
  anthropic." on stderr and exits 1 (pi-no_key); an API error (`FAKE_CLI_MODE=fail:<case>`: 400, 401, 429, 500,
  529) exits 0 with `"stopReason": "error"` and `errorMessage` in the last assistant message (pi-<case>).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import brain
import recorded

VERSION = "0.73.1"
FLAGS = {"--print": "-p", "--no-session": None, "--continue": "-c", "--resume": "-r", "--no-builtin-tools": "-nbt",
         "--no-tools": "-nt", "--no-extensions": "-ne", "--no-skills": "-ns", "--no-prompt-templates": "-np",
         "--no-themes": None, "--no-context-files": "-nc", "--verbose": None, "--approve": "-a",
         "--no-approve": "-na", "--offline": None, "--help": "-h", "--version": "-v"}  # fmt: skip
VALUED = {"--provider": None, "--model": None, "--api-key": None, "--thinking": None, "--models": None,
          "--session": None, "--session-id": None, "--fork": None, "--session-dir": None, "--name": "-n",
          "--tools": "-t", "--exclude-tools": "-xt", "--extension": "-e", "--skill": None, "--prompt-template": None,
          "--theme": None, "--use-theme": None, "--system-prompt": None, "--append-system-prompt": None,
          "--tui-mode": None, "--mode": None}  # fmt: skip
CHOICES = {"--thinking": ("off", "minimal", "low", "medium", "high", "xhigh", "max"), "--mode": ("text", "json", "rpc")}
SHORT = {s: long for long, s in {**FLAGS, **VALUED}.items() if s}
DEFAULT_TOOLS = ["read", "bash", "edit", "write"]


def fail(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(1)


def parse(argv: list[str]) -> tuple[dict[str, Any], list[str], list[str]]:
    opts: dict[str, Any] = {}
    files: list[str] = []
    messages: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            rest = argv[i:]
            files += [a[1:] for a in rest if a.startswith("@")]
            messages += [a for a in rest if not a.startswith("@")]
            break
        if arg.startswith("@"):
            files.append(arg[1:])
            continue
        if not arg.startswith("-"):
            messages.append(arg)
            continue
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (SHORT.get(arg, arg), "", "")
        if name in FLAGS:
            opts[name] = True
            continue
        if name not in VALUED:
            fail(f"Error: Unknown option: {arg}")
        if eq:
            value = inline
        elif i < len(argv):
            value, i = argv[i], i + 1
        else:
            fail(f"Error: {name} requires a value")
        if name in CHOICES and value not in CHOICES[name]:
            fail(f"Error: Invalid {name} '{value}'. Valid values: {', '.join(CHOICES[name])}")
        opts[name] = value
    return opts, files, messages


def assistant(content: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """An assistant message as pi 0.73.1 records it (pi-tools), costing $0.002."""
    usage = {
        "input": 450,
        "output": 75,
        "cacheRead": 50,
        "cacheWrite": 0,
        "totalTokens": 575,
        "cost": {"input": 0.00135, "output": 0.000625, "cacheRead": 0.000025, "cacheWrite": 0, "total": 0.002},
    }
    return {"role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anthropic",
            "model": model, "usage": usage, "stopReason": "toolUse" if any(
                c.get("type") == "toolCall" for c in content) else "stop", "timestamp": 0}  # fmt: skip


class Events:
    """`pi --mode json`'s events, shaped as recorded (pi-tools)."""

    def __init__(self, on: bool, model: str) -> None:
        self.on, self.model, self.calls, self.messages = on, model, 0, []
        self.emit({**recorded.events("pi-tools")[0], "id": "fake", "cwd": os.getcwd()})
        self.emit({"type": "agent_start"})

    def emit(self, event: dict[str, Any]) -> None:
        if self.on:
            print(json.dumps(event), flush=True)

    def message(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.emit({"type": "message_start", "message": message})
        self.emit({"type": "message_end", "message": message})

    def turn(self, prompt: str | None, tools: list[tuple[str, dict[str, Any], str]], text: str = "") -> None:
        """One turn: the user's prompt (first turn), the assistant's tool calls and their results, or its text."""
        self.emit({"type": "turn_start"})
        if prompt is not None:
            self.message({"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": 0})
        calls = []
        for name, args, _ in tools:
            self.calls += 1
            calls.append({"type": "toolCall", "id": f"toolu_{self.calls:04d}", "name": name, "arguments": args})
        reply = assistant(calls or [{"type": "text", "text": text}], self.model)
        self.message(reply)
        for call, (name, args, outcome) in zip(calls, tools, strict=True):
            failed = outcome != "ok" and not outcome.startswith("exit 0")
            result = {"content": [{"type": "text", "text": outcome}]}
            self.emit({"type": "tool_execution_start", "toolCallId": call["id"], "toolName": name, "args": args})
            self.emit({"type": "tool_execution_end", "toolCallId": call["id"], "toolName": name, "result": result,
                       "isError": failed})  # fmt: skip
            self.message({"role": "toolResult", "toolCallId": call["id"], "toolName": name, **result,
                          "isError": failed, "timestamp": 0})  # fmt: skip
        self.emit({"type": "turn_end", "message": reply, "toolResults": []})

    def end(self) -> None:
        self.emit({"type": "agent_end", "messages": self.messages})


def replay(name: str, on: bool) -> int:
    """What the real pi printed in recording `name` (its stdout only in json mode); its exit code."""
    data = recorded.load(name)
    if on:
        sys.stdout.write(data["stdout"])
    sys.stderr.write(data["stderr"])
    return int(data["returncode"])


def main(argv: list[str]) -> int:
    opts, files, messages = parse(argv)
    if opts.get("--version"):
        print(VERSION)
        return 0
    if opts.get("--help"):
        names = sorted(set(FLAGS) | set(VALUED) | set(SHORT))
        print("Usage: pi [options] [--] [@files...] [messages...]\n\nOptions:\n" + "\n".join(f"  {n}" for n in names))
        return 0
    piped = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    included = []
    for name in files:
        path = Path(name) if Path(name).is_absolute() else Path.cwd() / name
        if not path.is_file():
            fail(f"Error: File not found: {name}")
        included.append(path.read_text(encoding="utf-8"))
    prompt = "\n\n".join(p for p in (piped, *included, *messages) if p)
    on = opts.get("--mode", "text") == "json"
    tools = DEFAULT_TOOLS if "--tools" not in opts else [t for t in opts["--tools"].split(",") if t]
    if opts.get("--no-tools"):
        tools = []
    model = opts.get("--model", "")
    provider = opts.get("--provider") or ("openai" if model.startswith(("gpt", "o3", "openai/")) else "anthropic")
    key = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}.get(provider, "ANTHROPIC_API_KEY")
    if not os.environ.get(key):
        return replay("pi-no_key", on)
    failing = next((m.split(":", 1)[1] for m in brain.mode() if m.startswith("fail:")), None)
    if failing:
        return replay(f"pi-{failing}", on)
    out = Events(on, model)
    plan = brain.plan(prompt, Path.cwd())
    calls: list[dict[str, Any]] = []
    done: list[tuple[str, dict[str, Any], str]] = []
    for path, text in plan.edits:
        tool = "edit" if path.is_file() else "write"
        outcome = brain.try_write(path, text) if tool in tools else "unavailable"
        calls.append({"tool": tool, "path": str(path), "outcome": outcome})
        done.append((tool, {"path": str(path)}, outcome))
    for command in plan.commands:
        if "bash" in tools:
            proc = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True)
            calls.append({"tool": "bash", "command": command, "outcome": f"exit {proc.returncode}"})
            done.append(("bash", {"command": command}, f"exit {proc.returncode}"))
    text = brain.text_of(plan.answer) if "prose" not in brain.mode() else "I looked at the harness."
    if plan.result_file is not None:
        outcome = brain.try_write(plan.result_file, text) if "write" in tools else "unavailable"
        calls.append({"tool": "write", "path": str(plan.result_file), "outcome": outcome})
        done.append(("write", {"path": str(plan.result_file)}, outcome))
    brain.record(
        "pi",
        argv,
        prompt,
        [piped, *included, *messages],
        tools=tools,
        calls=calls,
        system_prompt=opts.get("--system-prompt", ""),
    )
    if done:
        out.turn(prompt[:200], done)
    out.turn(None if done else prompt[:200], [], text)
    out.end()
    if not on:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

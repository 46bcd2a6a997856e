#!/usr/bin/env python3
"""A stand-in for the `pi` coding agent (pi-coding-agent `docs/cli.md`, `docs/json.md`) for saddler's tests.

Behaves as its documentation says where saddler depends on it:
- options from the CLI reference (long and short forms); an unknown option is refused (exit 1);
- `@path` arguments include a file in the first prompt, other arguments are messages, a piped stdin is
  prepended; `--` ends option parsing;
- `--tools` is an allowlist of built-in tools (default read, bash, edit, write); `--thinking` takes off, minimal,
  low, medium, high, xhigh or max;
- pi has **no sandbox**: its write and bash tools reach whatever the process may write (so confinement is
  visible only when something like bubblewrap wraps it);
- `--mode json` prints JSONL events (`session`, `agent_start`, `message_end` with the assistant message and its
  usage/cost, `agent_end`); the answer is the final assistant text;
- without the provider's key (ANTHROPIC_API_KEY for anthropic models) the assistant message ends in error.
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


def assistant(text: str, *, error: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}] if text else [],
        "usage": {"input": 900, "output": 150, "cacheRead": 100, "cacheWrite": 0, "cost": {"total": 0.004}},
        "stopReason": "error" if error else "stop",
    }
    if error:
        message["errorMessage"] = error
    return message


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
    mode = opts.get("--mode", "text")
    tools = DEFAULT_TOOLS if "--tools" not in opts else [t for t in opts["--tools"].split(",") if t]
    if opts.get("--no-tools"):
        tools = []
    events: list[dict[str, Any]] = []

    def emit(event: dict[str, Any]) -> None:
        events.append(event)
        if mode == "json":
            print(json.dumps(event), flush=True)

    emit({"type": "session", "version": 3, "id": "fake", "cwd": os.getcwd()})
    emit({"type": "agent_start"})
    emit({"type": "message_end", "message": {"role": "user", "content": [{"type": "text", "text": prompt[:200]}]}})
    model = opts.get("--model", "")
    provider = opts.get("--provider") or ("openai" if model.startswith(("gpt", "o3", "openai/")) else "anthropic")
    key = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}.get(provider, "ANTHROPIC_API_KEY")
    if not os.environ.get(key):
        emit({"type": "message_end", "message": assistant("", error=f"No API key found for {provider}.")})
        emit({"type": "agent_end", "messages": []})
        return 1
    plan = brain.plan(prompt, Path.cwd())
    calls = []
    for path, text in plan.edits:
        tool = "edit" if path.is_file() else "write"
        calls.append({"tool": tool, "path": str(path),
                      "outcome": brain.try_write(path, text) if tool in tools else "unavailable"})  # fmt: skip
    for command in plan.commands:
        if "bash" in tools:
            proc = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True)
            calls.append({"tool": "bash", "command": command, "outcome": f"exit {proc.returncode}"})
    text = json.dumps(plan.answer)
    if plan.result_file is not None:
        outcome = brain.try_write(plan.result_file, text) if "write" in tools else "unavailable"
        calls.append({"tool": "write", "path": str(plan.result_file), "outcome": outcome})
    brain.record(
        "pi",
        argv,
        prompt,
        [piped, *included, *messages],
        tools=tools,
        calls=calls,
        system_prompt=opts.get("--system-prompt", ""),
    )
    emit({"type": "message_end", "message": assistant(text)})
    emit({"type": "agent_end", "messages": []})
    if mode != "json":
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""A stand-in for `codex exec` (codex-rs `exec/src/cli.rs`, `exec_events.rs`) for the command backend's tests.

Behaves as its documentation and source do where saddler depends on it:
- clap parsing: `--opt value`, `--opt=value`, short `-m X`; an unknown option is
  `error: unexpected argument '--x' found` (exit 2);
- the prompt is the positional argument; `-` or none reads stdin (a piped stdin beside a prompt is appended as
  a `<stdin>` block);
- outside a git repository without `--skip-git-repo-check` it refuses to start (exit 1);
- `--sandbox read-only` (the default) allows no writes; `workspace-write` allows the working directory, every
  `--add-dir`, /tmp and $TMPDIR; a write elsewhere fails like the real sandbox's EPERM;
- `--config key=value` parses the value as TOML, else keeps it as a string; `model_reasoning_effort` must be one
  of minimal, low, medium, high, xhigh;
- `--output-schema FILE` must be in OpenAI's strict form (every object closed, every property required), else
  the API refuses it and the turn fails;
- `--json` prints JSONL events: `thread.started`, `turn.started`, `item.completed` (file changes, the agent's
  message), `turn.completed` with usage; `-o/--output-last-message FILE` is written by codex itself (outside
  the sandbox) with the final message;
- without OPENAI_API_KEY / CODEX_API_KEY the turn fails with 401 Unauthorized (exit 1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import brain

VERSION = "codex-cli 0.63.0"
FLAGS = {"--json", "--experimental-json", "--skip-git-repo-check", "--ephemeral", "--ignore-user-config",
         "--ignore-rules", "--oss", "--dangerously-bypass-approvals-and-sandbox", "--yolo", "--full-auto", "-h",
         "--help", "-V", "--version"}  # fmt: skip
VALUED = {"--model": "-m", "--sandbox": "-s", "--config": "-c", "--output-last-message": "-o", "--cd": "-C",
          "--profile": "-p", "--image": "-i", "--output-schema": None, "--add-dir": None, "--color": None,
          "--local-provider": None}  # fmt: skip
REPEATED = {"--config", "--add-dir", "--image"}
SHORT = {short: long for long, short in VALUED.items() if short}
EFFORTS = {"minimal", "low", "medium", "high", "xhigh"}


def fail(message: str, code: int = 2) -> None:
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
        if arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (SHORT.get(arg, arg), "", "")
        if name in FLAGS:
            opts[name] = True
            continue
        if name not in VALUED:
            fail(f"error: unexpected argument '{arg}' found\n\nUsage: codex exec [OPTIONS] [PROMPT]")
        if eq:
            value = inline
        elif i < len(argv):
            value, i = argv[i], i + 1
        else:
            fail(f"error: a value is required for '{name} <VALUE>' but none was supplied")
        if name in REPEATED:
            opts.setdefault(name, []).append(value)
        else:
            opts[name] = value
    return opts, positional


def config_overrides(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        if not eq:
            fail(f"Invalid override (missing '='): {pair}")
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        out[key.strip()] = value
    effort = out.get("model_reasoning_effort")
    if effort is not None and effort not in EFFORTS:
        fail(f"Error loading config: unknown variant `{effort}` for model_reasoning_effort", 1)
    return out


def strict_problem(node: Any, where: str = "()") -> str | None:
    """Why OpenAI's strict structured outputs would refuse this schema, or None."""
    if isinstance(node, list):
        return next((p for n in node if (p := strict_problem(n, where))), None)
    if not isinstance(node, dict):
        return None
    if node.get("type") == "object" and isinstance(node.get("properties"), dict):
        if node.get("additionalProperties") is not False:
            return f"In context={where}, 'additionalProperties' is required to be supplied and to be false."
        missing = [k for k in node["properties"] if k not in node.get("required", [])]
        if missing:
            return (
                f"In context={where}, 'required' is required to be supplied and to be an array including every "
                f"key in properties. Missing '{missing[0]}'."
            )
    return next((p for k, v in node.items() if (p := strict_problem(v, f"{where}.{k}"))), None)


class Sandbox:
    def __init__(self, mode: str, cwd: Path, add_dirs: list[str]) -> None:
        if mode not in ("read-only", "workspace-write", "danger-full-access"):
            fail(f"error: invalid value '{mode}' for '--sandbox <SANDBOX_MODE>'")
        self.mode = mode
        roots = [cwd, *map(Path, add_dirs), Path("/tmp")]
        if os.environ.get("TMPDIR"):
            roots.append(Path(os.environ["TMPDIR"]))
        self.roots = [Path(os.path.realpath(r)) for r in roots]

    def write(self, path: Path, text: str) -> str:
        if self.mode == "read-only":
            return "denied: read-only sandbox"
        real = Path(os.path.realpath(path))
        if self.mode == "workspace-write" and not any(real == r or r in real.parents for r in self.roots):
            return "denied: Operation not permitted (outside the writable roots)"
        return brain.try_write(path, text)


def with_nulls(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> Any:
    """What a model answering a strict schema returns: every property present, absent ones as null."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    options = [o for o in schema.get("anyOf", []) if o.get("type") != "null"]
    if options and value is not None:
        return with_nulls(value, options[0], root)
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        return {k: with_nulls(value.get(k), sub, root) for k, sub in schema["properties"].items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [with_nulls(v, schema["items"], root) for v in value]
    return value


def emit(events: list[dict[str, Any]], json_mode: bool, event: dict[str, Any]) -> None:
    events.append(event)
    if json_mode:
        print(json.dumps(event), flush=True)


def main(argv: list[str]) -> int:
    if argv[:1] in (["--version"], ["-V"]):
        print(VERSION)
        return 0
    if not argv or argv[0] != "exec":
        fail("fake codex: only `codex exec` (and `codex --version`) are supported")
    opts, positional = parse(argv[1:])
    if opts.get("-V") or opts.get("--version"):
        print(VERSION)
        return 0
    if opts.get("-h") or opts.get("--help"):
        names = sorted(FLAGS | set(VALUED) | {s for s in SHORT})
        print("Usage: codex exec [OPTIONS] [PROMPT]\n\nOptions:\n" + "\n".join(f"  {n}" for n in names))
        return 0
    cwd = Path(opts.get("--cd") or os.getcwd())
    config = config_overrides(opts.get("--config", []))
    in_repo = subprocess.run(["git", "rev-parse"], cwd=cwd, capture_output=True).returncode == 0
    if not in_repo and not opts.get("--skip-git-repo-check"):
        fail("Not inside a trusted directory and --skip-git-repo-check was not specified.", 1)
    piped = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    given = [p for p in positional if p != "-"]
    prompt = f"{given[0]}\n\n<stdin>\n{piped}\n</stdin>" if given and piped else (given[0] if given else piped)
    if not prompt.strip():
        fail("No prompt provided. Either specify one as an argument or pipe the prompt into stdin.", 1)
    json_mode = bool(opts.get("--json") or opts.get("--experimental-json"))
    events: list[dict[str, Any]] = []
    emit(events, json_mode, {"type": "thread.started", "thread_id": "fake-thread"})
    emit(events, json_mode, {"type": "turn.started"})
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("CODEX_API_KEY")):
        message = "unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"
        emit(events, json_mode, {"type": "error", "message": message})
        emit(events, json_mode, {"type": "turn.failed", "error": {"message": message}})
        return 1
    schema = None
    if "--output-schema" in opts:
        schema = json.loads(Path(opts["--output-schema"]).read_text(encoding="utf-8"))
        problem = strict_problem(schema)
        if problem:
            message = f"Invalid schema for response_format 'codex_output_schema': {problem}"
            emit(events, json_mode, {"type": "error", "message": message})
            emit(events, json_mode, {"type": "turn.failed", "error": {"message": message}})
            return 1
    sandbox = Sandbox(opts.get("--sandbox", "read-only"), cwd, opts.get("--add-dir", []))
    plan = brain.plan(prompt, cwd)
    writes = []
    answer_text = json.dumps(with_nulls(plan.answer, schema, schema) if schema else plan.answer)
    targets = plan.edits + ([(plan.result_file, answer_text)] if plan.result_file else [])
    for n, (path, text) in enumerate(targets):
        outcome = sandbox.write(path, text)
        writes.append({"path": str(path), "outcome": outcome})
        status = "completed" if outcome == "ok" else "failed"
        change = {"path": str(path), "kind": "update" if path.exists() else "add"}
        emit(events, json_mode, {"type": "item.completed",
                                 "item": {"id": f"item_{n}", "type": "file_change", "changes": [change],
                                          "status": status}})  # fmt: skip
    if plan.result_file is not None and writes[-1]["outcome"] != "ok":
        answer_text = f"I could not write {plan.result_file}: {writes[-1]['outcome']}"
    brain.record(
        "codex",
        argv,
        prompt,
        [piped, *given],
        sandbox=sandbox.mode,
        writes=writes,
        config=config,
        schema=schema is not None,
    )
    emit(events, json_mode, {"type": "item.completed",
                             "item": {"id": "item_msg", "type": "agent_message", "text": answer_text}})  # fmt: skip
    usage = {"input_tokens": 1500, "cached_input_tokens": 300, "output_tokens": 200}
    emit(events, json_mode, {"type": "turn.completed", "usage": usage})
    if "--output-last-message" in opts:
        Path(opts["--output-last-message"]).write_text(answer_text, encoding="utf-8")
    if not json_mode:
        print(answer_text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

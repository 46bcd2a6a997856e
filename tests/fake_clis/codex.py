#!/usr/bin/env python3
"""A stand-in for `codex exec` (codex-cli 0.171.0) for the command backend's tests, built from what the real CLI
printed against the loopback model (tests/fixtures/real_clis/codex-*.json, `recorded`) and from its source
(`exec/src/cli.rs`) for the parsing:
- clap parsing: `--opt value`, `--opt=value`, short `-m X`; an unknown option is
  `error: unexpected argument '--x' found` (exit 2);
- the prompt is the positional argument; `-` or none reads stdin (a piped stdin beside a prompt is appended as
  a `<stdin>` block);
- outside a git repository without `--skip-git-repo-check` it refuses to start (exit 1);
- `--sandbox read-only` (the default) allows no writes: a patch is "rejected" (an ERROR line on stderr, no
  file_change item, as recorded in codex-tools_read_only); `workspace-write` allows the working directory, every
  `--add-dir`, /tmp and $TMPDIR unless `sandbox_workspace_write.exclude_slash_tmp` / `exclude_tmpdir_env_var`;
- with CODEX_HOME under /tmp its sandbox helper cannot start: the recorded WARNING on stderr, every command and
  patch fails, the turn still completes (exit 0) — codex-sandbox_tmp; `codex sandbox -- CMD` fails (exit 1) —
  codex-sandbox_probe_tmp;
- `--config key=value` parses the value as TOML, else keeps it as a string; `model_reasoning_effort` must be one
  of minimal, low, medium, high, xhigh;
- `--output-schema FILE` must be in OpenAI's strict form (every object closed, every property required), else
  the API refuses it and the turn fails;
- `--json` prints the recorded JSONL events: `thread.started`, the "Model metadata … not found" error *item*,
  `turn.started`, `item.started`/`item.completed` per command (`command_execution`) and patch (`file_change`),
  the `agent_message`, `turn.completed` with usage; `-o/--output-last-message FILE` is written by codex itself;
- failures are the recorded ones: no key (`Missing environment variable: `OPENAI_API_KEY`.`, exit 1),
  `FAKE_CLI_MODE=fail:<case>` replays codex-<case> (429, 500, 503, usage_limit, ...), `disconnect` drops the
  stream once: the recorded "Reconnecting... 1/2" error event, then the answer.
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
import recorded

VERSION = "codex-cli 0.171.0"
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
    def __init__(self, mode: str, cwd: Path, add_dirs: list[str], config: dict[str, Any]) -> None:
        if mode not in ("read-only", "workspace-write", "danger-full-access"):
            fail(f"error: invalid value '{mode}' for '--sandbox <SANDBOX_MODE>'")
        self.mode = mode
        roots = [cwd, *map(Path, add_dirs)]
        if config.get("sandbox_workspace_write.exclude_slash_tmp") is not True:
            roots.append(Path("/tmp"))
        if os.environ.get("TMPDIR") and config.get("sandbox_workspace_write.exclude_tmpdir_env_var") is not True:
            roots.append(Path(os.environ["TMPDIR"]))
        self.roots = [Path(os.path.realpath(r)) for r in roots]
        self.broken = helper_refused()

    def write(self, path: Path, text: str) -> str:
        if self.broken:
            return "bwrap: execvp codex-linux-sandbox: No such file or directory"
        if self.mode == "read-only":
            return "patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings"
        real = Path(os.path.realpath(path))
        if self.mode == "workspace-write" and not any(real == r or r in real.parents for r in self.roots):
            return "patch rejected: writing outside of the project; rejected by user approval settings"
        return brain.try_write(path, text)


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def helper_refused() -> bool:
    """codex refuses to put its sandbox helper (`codex-linux-sandbox`) under a CODEX_HOME in /tmp."""
    return Path(os.path.realpath(codex_home())).is_relative_to("/tmp")


def helper_warning() -> str:
    """The WARNING codex prints then (recorded), naming this CODEX_HOME."""
    line = recorded.load("codex-sandbox_tmp")["stderr"].splitlines()[0]
    return line[: line.index('AbsolutePathBuf("') + 17] + f'{codex_home()}"))\n'


def sandbox_command(argv: list[str]) -> int:
    """`codex sandbox [--config K=V]... [-C DIR] -- CMD...`: CMD in codex's sandbox (failing like the real one when
    CODEX_HOME lies under /tmp)."""
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    if helper_refused():
        sys.stderr.write(helper_warning() + "bwrap: execvp codex-linux-sandbox: No such file or directory\n")
        return 1
    if not command:
        fail("error: the following required arguments were not provided:\n  <COMMAND>...")
    return subprocess.run(command, check=False).returncode


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


def main(argv: list[str]) -> int:
    if argv[:1] in (["--version"], ["-V"]):
        print(VERSION)
        return 0
    if argv[:1] == ["sandbox"]:
        return sandbox_command(argv[1:])
    if not argv or argv[0] != "exec":
        fail("fake codex: only `codex exec`, `codex sandbox` (and `codex --version`) are supported")
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
    model = opts.get("--model", "gpt-5.1-codex")
    out = Events(json_mode, model)
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("CODEX_API_KEY")):
        return out.replay("codex-no_key")
    failing = next((m.split(":", 1)[1] for m in brain.mode() if m.startswith("fail:")), None)
    if failing:
        return out.replay(f"codex-{failing}")
    schema = None
    if "--output-schema" in opts:
        schema = json.loads(Path(opts["--output-schema"]).read_text(encoding="utf-8"))
        problem = strict_problem(schema)
        if problem:
            out.failed(f"Invalid schema for response_format 'codex_output_schema': {problem}")
            return 1
    sandbox = Sandbox(opts.get("--sandbox", "read-only"), cwd, opts.get("--add-dir", []), config)
    if sandbox.broken:
        sys.stderr.write(helper_warning())
    plan = brain.plan(prompt, cwd)
    writes, commands = [], []
    answer = with_nulls(plan.answer, schema, schema) if schema else plan.answer
    answer_text = brain.text_of(answer) if "prose" not in brain.mode() else "I looked at the harness."
    targets = plan.edits + ([(plan.result_file, answer_text)] if plan.result_file else [])
    for path, text in targets:
        outcome = sandbox.write(path, text)
        writes.append({"path": str(path), "outcome": outcome})
        if outcome == "ok":
            out.file_change(path)
        else:
            sys.stderr.write(f"2026-12-01T23:34:41.696427Z ERROR codex_core::tools::router: error={outcome}\n")
    for command in plan.commands:
        commands.append(command)
        if not sandbox.broken:
            proc = subprocess.run(["/bin/bash", "-lc", command], cwd=cwd, capture_output=True, text=True)
            out.command(command, proc.stdout + proc.stderr, proc.returncode)
    if plan.result_file is not None and writes[-1]["outcome"] != "ok":
        answer_text = f"I could not write {plan.result_file}: {writes[-1]['outcome']}"
    brain.record(
        "codex",
        argv,
        prompt,
        [piped, *given],
        sandbox=sandbox.mode,
        writes=writes,
        commands=commands,
        config=config,
        schema=schema is not None,
    )
    if "disconnect" in brain.mode():  # the stream dropped after the message; codex reconnects and asks again
        out.message(answer_text)
        out.emit(recorded.events("codex-disconnected")[4])
    out.message(answer_text)
    out.completed({"input_tokens": 1500, "cached_input_tokens": 300, "output_tokens": 200})
    if "--output-last-message" in opts:
        Path(opts["--output-last-message"]).write_text(answer_text, encoding="utf-8")
    if not json_mode:
        print(answer_text)
    return 0


class Events:
    """`codex exec --json`'s events, shaped as the recordings show them (codex-tools, codex-ok)."""

    def __init__(self, json_mode: bool, model: str) -> None:
        self.json_mode, self.items = json_mode, 0
        started, warning, turn = recorded.events("codex-tools")[:3]
        warning["item"]["message"] = warning["item"]["message"].replace("gpt-5.1-codex", model)
        self.emit({**started, "thread_id": "fake-thread"})
        self.emit(warning)
        self.emit(turn)
        self.items = 1

    def emit(self, event: dict[str, Any]) -> None:
        if self.json_mode:
            print(json.dumps(event), flush=True)

    def item(self, item: dict[str, Any], started: dict[str, Any] | None = None) -> None:
        self.items += 1
        if started is not None:
            self.emit({"type": "item.started", "item": {"id": f"item_{self.items - 1}", **started}})
        self.emit({"type": "item.completed", "item": {"id": f"item_{self.items - 1}", **item}})

    def command(self, command: str, output: str, code: int) -> None:
        shown = f"/bin/bash -lc {json.dumps(command)}"
        base = {"type": "command_execution", "command": shown}
        self.item({**base, "aggregated_output": output, "exit_code": code, "status": "completed"},
                  {**base, "aggregated_output": "", "exit_code": None, "status": "in_progress"})  # fmt: skip

    def file_change(self, path: Path) -> None:
        change = {"type": "file_change", "changes": [{"path": str(path), "kind": "update"}]}
        self.item({**change, "status": "completed"}, {**change, "status": "in_progress"})

    def message(self, text: str) -> None:
        self.item({"type": "agent_message", "text": text})

    def completed(self, usage: dict[str, int]) -> None:
        self.emit({"type": "turn.completed", "usage": {**recorded.events("codex-tools")[-1]["usage"], **usage}})

    def failed(self, message: str) -> None:
        self.emit({"type": "error", "message": message})
        self.emit({"type": "turn.failed", "error": {"message": message}})

    def replay(self, name: str) -> int:
        """What the real codex printed after `turn.started` in recording `name`; its exit code."""
        data = recorded.load(name)
        for event in recorded.events(name)[3:]:
            self.emit(event)
        sys.stderr.write(data["stderr"])
        return int(data["returncode"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

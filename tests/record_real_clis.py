#!/usr/bin/env python3
"""Record what the real claude, codex and pi CLIs print when their model answers, fails or runs out of its usage
window: `python tests/record_real_clis.py [CASE_PREFIX]` writes `tests/fixtures/real_clis/<cli>-<case>.json`
(argv, exit code, stdout, stderr, the requests the model saw). The stand-ins (`tests/fake_clis/`) and the
parsers' tests replay these recordings; re-record after upgrading a CLI (`tests/real_clis.PACKAGES`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import real_clis
from loopback_model import LoopbackModel, Reply, ToolCall, anthropic_error, openai_error

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real_clis"
SCRATCH = Path(__file__).resolve().parents[1] / ".test-runs" / "record-real-clis"
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
RESET = 4 * 3600 + 10 * 60  # a usage window that resets 4 h 10 min after the recording


@dataclass
class Case:
    cli: str
    name: str
    replies: list[Reply]
    oauth: bool = False
    retries: int = 0
    extra: list[str] = field(default_factory=list)
    resets_at: int | None = None  # the usage window's reset the model's reply announced
    no_key: bool = False  # no API key in the environment at all
    home_under_tmp: bool = False  # HOME (and CODEX_HOME) under /tmp
    argv: list[str] | None = None  # another command than the CLI's session (`codex sandbox -- true`)
    files: dict[str, str] = field(default_factory=dict)  # written in the working folder first


def _claude_argv(work: Path) -> list[str]:
    return [
        "claude",
        "-p",
        "--output-format",
        "json",
        "--model",
        "claude-sonnet-4-5",
        "--json-schema",
        json.dumps(SCHEMA),
        "--no-session-persistence",
    ]


def _codex_argv(work: Path) -> list[str]:
    schema = work / "schema.json"
    schema.write_text(json.dumps(SCHEMA), encoding="utf-8")
    return [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "read-only",
        "--model",
        "gpt-5.1-codex",
        "--output-schema",
        str(schema),
        "-",
    ]


def _pi_argv(work: Path) -> list[str]:
    return ["pi", "--mode", "json", "--no-session", "--model", "claude-sonnet-4-5", "Answer in JSON."]


ARGV = {"claude": _claude_argv, "codex": _codex_argv, "pi": _pi_argv}
ANSWER = '{"answer": "hi"}'


def anthropic_cases() -> list[Case]:
    reset = str(int(time.time()) + RESET)
    window = {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": reset,
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
    }
    errors = {
        "400": anthropic_error(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"),
        "401": anthropic_error(401, "authentication_error", "invalid x-api-key"),
        "429": anthropic_error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            {"retry-after": "1"},
        ),
        "500": anthropic_error(500, "api_error", "Internal server error"),
        "529": anthropic_error(529, "overloaded_error", "Overloaded"),
    }
    cases = []
    for cli in ("claude", "pi"):
        ok = [Reply(calls=[ToolCall("StructuredOutput", {"answer": "hi"})]), Reply(text="Done.")]
        cases.append(Case(cli, "ok", ok if cli == "claude" else [Reply(text=ANSWER)]))
        cases += [Case(cli, name, [reply] * 12) for name, reply in errors.items()]
    cases.append(Case("claude", "prose", [Reply(text="The answer is hi.")] * 6))
    invalid = Reply(calls=[ToolCall("StructuredOutput", {"reply": "hi"})])
    cases.append(Case("claude", "structured_invalid", [invalid] * 12))
    reads = [Reply(calls=[ToolCall("Read", {"file_path": str(SCRATCH / "claude-max_turns" / "a.txt")})])] * 6
    cases.append(Case("claude", "max_turns", reads, files={"a.txt": "one\n"}, extra=["--max-turns", "2"]))
    limit = anthropic_error(429, "rate_limit_error", "This request would exceed your account's rate limit.", window)
    cases.append(Case("claude", "usage_limit", [limit] * 6, oauth=True, resets_at=int(reset)))
    cases.append(Case("pi", "429_retried", [errors["429"], Reply(text=ANSWER)], retries=1))
    cases += [Case(cli, "no_key", [], no_key=True) for cli in ("claude", "pi")]
    return cases


def responses_cases() -> list[Case]:
    errors = {
        "400": openai_error(400, "invalid_request_error", "Invalid schema for response_format 'codex_output_schema'"),
        "401": openai_error(401, "invalid_api_key", "Incorrect API key provided: sk-loopback."),
        "429": openai_error(
            429, "rate_limit_exceeded", "Rate limit reached for gpt-5 on tokens per min (TPM).", {"retry-after": "1"}
        ),
        "500": openai_error(500, "server_error", "The server had an error while processing your request."),
        "503": openai_error(503, "server_is_overloaded", "Our servers are currently overloaded."),
        "usage_limit": openai_error(
            429,
            "usage_limit_reached",
            "The usage limit has been reached",
            plan_type="plus",
            resets_at=int(time.time()) + RESET,
            resets_in_seconds=RESET,
        ),
    }
    cases = [Case("codex", "ok", [Reply(text=ANSWER)])]
    cases += [Case("codex", name, [reply] * 12) for name, reply in errors.items()]
    cases[-1].resets_at = errors["usage_limit"].error["error"]["resets_at"]  # type: ignore[index]
    cases.append(Case("codex", "500_reconnected", [errors["500"], Reply(text=ANSWER)], retries=2))
    cases.append(Case("codex", "disconnected", [Reply(text=ANSWER, disconnect=True), Reply(text=ANSWER)], retries=2))
    cases.append(Case("codex", "no_key", [], no_key=True))
    shell = Reply(calls=[ToolCall("exec_command", {"cmd": "echo checked > checked.txt"})])
    cases.append(Case("codex", "sandbox_tmp", [shell, Reply(text=ANSWER)], home_under_tmp=True))
    probe = ["codex", "sandbox", "--config", 'sandbox_mode="read-only"', "--", "true"]
    cases.append(Case("codex", "sandbox_probe", [], argv=probe))
    cases.append(Case("codex", "sandbox_probe_tmp", [], argv=probe, home_under_tmp=True))
    return cases


def _merged(argv: list[str], extra: list[str]) -> list[str]:
    """`argv` with `extra`'s `--option value` pairs, replacing the value of an option `argv` already passes."""
    argv = list(argv)
    for option, value in zip(extra[::2], extra[1::2], strict=True):
        if option in argv:
            argv[argv.index(option) + 1] = value
        else:
            argv += [option, value]
    return argv


def tool_cases() -> list[Case]:
    """Sessions that read and edit `a.txt` with the CLI's own tools, then answer (what the stand-ins' events and the
    fleet mode's streamed output are modelled on)."""
    files = {"a.txt": "one\n"}

    def target(cli: str, name: str) -> str:
        return str(SCRATCH / f"{cli}-{name}" / "a.txt")

    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n+two\n*** End Patch\n"
    codex = [
        Reply(calls=[ToolCall("exec_command", {"cmd": "cat a.txt"})]),
        Reply(calls=[ToolCall("exec_command", {"cmd": f"apply_patch <<'EOF'\n{patch}EOF"})]),
        Reply(text=ANSWER),
    ]
    pi = [
        Reply(calls=[ToolCall("read", {"path": target("pi", "tools")})]),
        Reply(calls=[ToolCall("edit", {"path": target("pi", "tools"), "edits": [{"oldText": "one\n",
                                                                                  "newText": "one\ntwo\n"}]})]),
        Reply(text=ANSWER),
    ]  # fmt: skip

    def claude(name: str, last: list[Reply]) -> list[Reply]:
        edit = {"file_path": target("claude", name), "old_string": "one\n", "new_string": "one\ntwo\n"}
        return [
            Reply(calls=[ToolCall("Read", {"file_path": target("claude", name)})]),
            Reply(calls=[ToolCall("Edit", edit)]),
            *last,
        ]

    structured = [Reply(calls=[ToolCall("StructuredOutput", {"answer": "hi"})]), Reply(text="Done.")]
    stream = ["claude", "-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5",
              "--permission-mode", "acceptEdits", "--allowedTools", "Read,Edit",
              "--no-session-persistence"]  # fmt: skip
    return [
        Case("codex", "tools", codex, files=files, extra=["--sandbox", "workspace-write"]),
        Case("codex", "tools_read_only", codex, files=files),
        Case("pi", "tools", pi, files=files),
        Case("claude", "tools", claude("tools", structured), files=files, extra=["--permission-mode", "acceptEdits"]),
        Case("claude", "stream", claude("stream", [Reply(text="Added two.\nDESCRIPTION: add two")]), argv=stream,
             files=files),
    ]  # fmt: skip


def record(case: Case) -> dict[str, Any]:
    model = LoopbackModel().start()
    model.script.extend(case.replies)
    work = SCRATCH / f"{case.cli}-{case.name}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name, text in case.files.items():
        (work / name).write_text(text, encoding="utf-8")
    home = work / "home"
    if case.home_under_tmp:
        home = Path(tempfile.mkdtemp(prefix="saddler-record-", dir="/tmp")) / "home"
    env = real_clis.environment(home, model.url, oauth=case.oauth, retries=case.retries)
    if case.no_key:
        for key in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY", "CODEX_API_KEY"):
            env.pop(key, None)
    argv = case.argv or _merged(ARGV[case.cli](work), case.extra)
    started = time.time()
    try:
        proc = subprocess.run(argv, cwd=work, env=env, input=ANSWER and "Answer in JSON.", capture_output=True,
                              text=True, timeout=300)  # fmt: skip
    finally:
        model.stop()
        if case.home_under_tmp:
            shutil.rmtree(home.parent, ignore_errors=True)
    return {
        "cli": case.cli,
        "case": case.name,
        "version": real_clis.version(case.cli),
        "recorded_at": int(started),
        "argv": argv[1:],
        "returncode": proc.returncode,
        "stdout": proc.stdout,
        "stderr": proc.stderr,
        "resets_at": case.resets_at,
        "requests": len([r for r in model.requests if r["method"] == "POST"]),
        "tool_outputs": _tool_outputs(model),
    }


def _tool_outputs(model: LoopbackModel) -> list[str]:
    """What the CLI sent back to the model as the results of its tool calls (the last request holds them all)."""
    posts = [r["body"] for r in model.requests if r["method"] == "POST" and r["body"].get("tools")]
    if not posts:
        return []
    last = posts[-1]
    outputs = [str(i.get("output")) for i in last.get("input") or [] if i.get("type") == "function_call_output"]
    for message in last.get("messages") or []:
        for part in message.get("content") or [] if isinstance(message.get("content"), list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_result":
                outputs.append(json.dumps(part.get("content")))
    return outputs


def main(prefix: str = "") -> None:
    real_clis.install()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for case in anthropic_cases() + responses_cases() + tool_cases():
        name = f"{case.cli}-{case.name}"
        if not name.startswith(prefix):
            continue
        data = record(case)
        (FIXTURES / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"{name}: exit {data['returncode']}, {data['requests']} request(s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")

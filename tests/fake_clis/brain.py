"""What the fake CLI agents (claude, codex, pi) decide, independent of how each CLI carries it out.

Each fake parses its CLI's real flags and enforces its CLI's rules (tools, permissions, hooks, sandbox); this
module only plays the model: read the session prompt, choose the edit a diagnosis makes and the JSON answer.
The answer is built with tests/fake_agent.py's rules so every backend test speaks the same prompts.

Test knobs (environment):
- `FAKE_CLI_RECORD`: a JSONL file each run appends to (argv, prompt digests and length, tools seen, tool calls),
  or `tcp://HOST:PORT` of a collector (a CLI confined to a read-only filesystem can still report).
- `FAKE_CLI_ESCAPE`: a path the agent also tries to write during diagnosis (a sandbox/guard test).
- `FAKE_CLI_BASH`: a JSON list of shell commands the agent tries to run.
- `FAKE_CLI_MODE`: `max_turns` (the CLI stops at its turn limit), `no_answer` (the agent ends without JSON).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fake_agent import allowed_kinds, evolve, pick_file, reflect


@dataclass
class Plan:
    """The model's decisions for one session."""

    role: str
    answer: Any  # a JSON answer (dict), or prose (str: a fleet experiment)
    edits: list[tuple[Path, str]] = field(default_factory=list)  # (file, new full text)
    result_file: Path | None = None  # the prompt asks the agent to write its answer here
    commands: list[str] = field(default_factory=list)


def role_of(prompt: str) -> str:
    if "of the autoresearch fleet" in prompt[:500]:
        return "fleet"
    for heading, role in (("# Diagnosis-Patch", "diagnosis_patch"), ("# Reflection", "reflection"),
                          ("# Evolution", "evolution")):  # fmt: skip
        if heading in prompt[:4000]:
            return role
    return "unknown"


def plan(prompt: str, cwd: Path) -> Plan:
    """Decide edits and answer for `prompt` run in `cwd`."""
    role = role_of(prompt)
    named = re.search(r"to the file `([^`]+)`", prompt)
    result_file = Path(named.group(1)) if named else None
    commands = json.loads(os.environ.get("FAKE_CLI_BASH", "[]"))
    if role == "reflection":
        return Plan(role, reflect(prompt), result_file=result_file, commands=commands)
    if role == "evolution":
        return Plan(role, evolve(prompt), result_file=result_file, commands=commands)
    if role == "fleet":  # a fleet experiment answers in prose, ending with its DESCRIPTION line
        return Plan(role, "Read program.md; nothing worth changing.\nDESCRIPTION: read program.md", commands=commands)
    if role != "diagnosis_patch":
        return Plan(role, {"error": "unknown session prompt"}, result_file=result_file)
    edits: list[tuple[Path, str]] = []
    escape = os.environ.get("FAKE_CLI_ESCAPE")
    if escape:
        edits.append((Path(escape), "written by the agent\n"))
    target = pick_file(prompt, cwd)
    if target is None:
        answer = {"status": "no_patch", "reason": "no editable file of an allowed kind"}
        return Plan(role, answer, edits, result_file, commands)
    rel = target.relative_to(cwd).as_posix()
    note = "\n# verify results before answering\n" if target.suffix == ".py" else "\nRe-check every tool result.\n"
    edits.append((target, target.read_text(encoding="utf-8") + note))
    answer = {
        "status": "patched",
        "hypothesis": {
            "target_tasks": re.findall(r"^- `([^`]+)` .*FAIL", prompt, re.MULTILINE),
            "diagnosis": f"the agent finishes without verifying; {rel} is where it decides",
            "plan": f"add a verification step to {rel}",
            "patch_kind": "steering" if allowed_kinds(prompt)[:1] == ["steering"] else "capability",
            "subtype": "tool" if target.suffix == ".py" else "prompt",
            "files": [rel],
            "symptoms": ["finished_unverified"],
        },
    }
    return Plan(role, answer, edits, result_file, commands)


def text_of(answer: Any) -> str:
    """The final message carrying `answer`: prose as it is, a JSON answer as JSON."""
    return answer if isinstance(answer, str) else json.dumps(answer)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record(cli: str, argv: list[str], prompt: str, parts: list[str], **data: Any) -> None:
    """Append what this run saw to `$FAKE_CLI_RECORD` (when set); `parts` are the pieces the prompt was
    assembled from (stdin, files, arguments), recorded by digest so a test can check one arrived intact."""
    path = os.environ.get("FAKE_CLI_RECORD")
    if not path:
        return
    entry = {
        "cli": cli,
        "argv": [a if len(a) < 2000 else f"<{len(a)} chars>" for a in argv],
        "cwd": os.getcwd(),
        "prompt_len": len(prompt),
        "part_sha256": [digest(p) for p in parts],
        **data,
    }
    line = json.dumps(entry, default=str) + "\n"
    if path.startswith("tcp://"):  # the collector of a test whose CLI runs in a read-only sandbox
        host, port = path[len("tcp://") :].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(line.encode("utf-8"))
            conn.shutdown(socket.SHUT_WR)
            conn.recv(16)  # the collector acknowledges once the line is written
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)


def try_write(path: Path, text: str) -> str:
    """Write as an unconfined process would; `ok` or the OS error (a sandbox around the CLI shows up here)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"
    return "ok"


def mode() -> set[str]:
    return {m for m in os.environ.get("FAKE_CLI_MODE", "").split(",") if m}

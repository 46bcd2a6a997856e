#!/usr/bin/env python3
"""A fake CLI coding agent for the `command` backend's tests: behaves like `claude -p --output-format json`.

Usage: `fake_agent.py PROMPT_OR_PROMPT_FILE`. It reads the session prompt, works out the role from its
heading, and acts as an agent would: diagnosis edits a harness file of an allowed kind in its working
directory (the candidate worktree), preferring the file the evidence implicates; reflection writes one
lesson per task outcome; evolution continues from the current node. The answer goes to the result file
the prompt names; a JSON result line with usage and cost goes to stdout.

`FAKE_AGENT_MODE` selects misbehaviour: `auth_fail`, `rate_limit_once` (needs `FAKE_AGENT_STATE`),
`hang`, `no_result`, `protected` (edits saddler.toml), `max_turns`, `commits` (commits its edit).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from saddler.harness.components import matches as matches_any


def read_prompt(arg: str) -> str:
    path = Path(arg)
    if len(arg) < 4096 and path.is_file():
        return path.read_text(encoding="utf-8")
    return arg


def result_file(prompt: str) -> Path:
    match = re.search(r"to the file `([^`]+)`", prompt)
    if not match:
        sys.exit("fake_agent: the prompt names no result file")
    return Path(match.group(1))


def component_globs(prompt: str) -> dict[str, list[str]]:
    globs: dict[str, list[str]] = {}
    for kind, rest in re.findall(r"^- (capability|steering|protected): (.*)$", prompt, re.MULTILINE):
        globs[kind] = re.findall(r"`([^`]+)`", rest)
    return globs


def allowed_kinds(prompt: str) -> list[str]:
    """The patch kinds a diagnosis prompt allows (its `Allowed patch kinds: **...**` line); none without one."""
    match = re.search(r"Allowed patch kinds: \*\*(.*?)\*\*", prompt)
    return [k.strip() for k in match.group(1).split(",")] if match else []


def pick_file(prompt: str, root: Path) -> Path | None:
    kinds = allowed_kinds(prompt)
    globs = component_globs(prompt)
    allowed = [g for k in kinds for g in globs.get(k, [])]
    protected = globs.get("protected", [])
    implicated = re.findall(r"failure point in: `([^`]+)`", prompt)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    candidates = [f for f in implicated if f in files] + files
    for rel in candidates:
        if matches_any(rel, allowed) and not matches_any(rel, protected) and rel.endswith((".py", ".md", ".txt")):
            return root / rel
    return None


def diagnose(prompt: str, root: Path) -> dict:
    if os.environ.get("FAKE_AGENT_MODE") == "protected":
        (root / "saddler.toml").write_text((root / "saddler.toml").read_text() + "\n# edited by the agent\n")
        return {
            "status": "patched",
            "hypothesis": {
                "diagnosis": "config",
                "plan": "edit config",
                "patch_kind": "capability",
                "files": ["saddler.toml"],
            },
        }
    target = pick_file(prompt, root)
    if target is None:
        return {"status": "no_patch", "reason": "no editable file of an allowed kind"}
    kind = "steering" if "steering" in allowed_kinds(prompt) else "capability"
    iteration = re.search(r"iteration (\d+)", prompt).group(1)
    retry = re.search(r"This is retry (\d+)", prompt)
    if retry:
        iteration += f", retry {retry.group(1)}"
    if target.suffix == ".py":
        note = f"\n# fake agent (iteration {iteration}): verify results before answering\n"
    else:
        note = f"\nBefore you answer, re-check every tool result (fake agent, iteration {iteration}).\n"
    target.write_text(target.read_text(encoding="utf-8") + note, encoding="utf-8")
    if os.environ.get("FAKE_AGENT_MODE") == "commits":  # an agent that commits its own work
        subprocess.run(
            ["git", "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qam", "agent"], cwd=root, check=True
        )
    failing = re.findall(r"^- `([^`]+)` .*FAIL", prompt, re.MULTILINE)
    history = "no history yet"
    db = os.environ.get("EVODAG_DB", "")
    if db and Path(db).is_file():  # read earlier lessons as the prompt says, through the evo-dag CLI
        proc = subprocess.run(["evo-dag", "lessons", "--json"], capture_output=True, text=True, check=False)
        history = f"evo-dag lessons: {len(json.loads(proc.stdout)['lessons'])}" if proc.returncode == 0 else "none"
    rel = target.relative_to(root).as_posix()
    return {
        "status": "patched",
        "hypothesis": {
            "target_tasks": failing,
            "diagnosis": f"the agent finishes without verifying; {rel} is where it decides ({history})",
            "plan": f"add a verification step to {rel} (iteration {iteration})",
            "patch_kind": kind,
            "subtype": "tool" if target.suffix == ".py" else "prompt",
            "files": [rel],
            "symptoms": ["finished_unverified"],
        },
    }


def reflect(prompt: str) -> dict:
    """One lesson per task, carrying the category saddler measured (in brackets after the transition)."""
    lessons = []
    for task, before, after, category in re.findall(
        r"^- `([^`]+)`: ([PF-]+) -> ([PF-]+) \((\w+)", prompt, re.MULTILINE
    ):
        lessons.append(
            {
                "task_id": task,
                "category": category,
                "attribution": "uncertain",
                "text": f"{task}: {before} -> {after}; one repetition cannot separate the change from noise",
            }
        )
    return {"lessons": lessons, "summary": f"{len(lessons)} task outcome(s) reviewed"}


def evolve(prompt: str) -> dict:
    current = int(re.search(r"start from the current node (\d+)", prompt).group(1))
    return {"action": "continue", "parent_node_id": current, "edge_ids": [], "rationale": "keep building on the latest"}


def main() -> int:
    mode = os.environ.get("FAKE_AGENT_MODE", "")
    prompt = read_prompt(sys.argv[-1])
    if mode == "auth_fail":
        print("Error: Invalid API key · Please run /login", file=sys.stderr)
        return 1
    if mode == "rate_limit_once":
        state = Path(os.environ["FAKE_AGENT_STATE"])
        if not state.exists():
            state.write_text("1")
            print("API Error: 529 overloaded", file=sys.stderr)
            return 1
    if mode == "hang":
        time.sleep(60)
    if mode == "max_turns":
        print(
            json.dumps(
                {
                    "type": "result",
                    "subtype": "error_max_turns",
                    "is_error": True,
                    "num_turns": 40,
                    "total_cost_usd": 0.5,
                    "usage": {"input_tokens": 9000, "output_tokens": 900},
                }
            )
        )
        return 1
    if prompt.startswith("# Diagnosis-Patch"):
        answer = diagnose(prompt, Path.cwd())
    elif prompt.startswith("# Reflection"):
        answer = reflect(prompt)
    elif prompt.startswith("# Evolution"):
        answer = evolve(prompt)
    else:
        print("fake_agent: unknown session prompt", file=sys.stderr)
        return 2
    if mode != "no_result":
        result_file(prompt).write_text(json.dumps(answer), encoding="utf-8")
    print(
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "num_turns": 3,
                "total_cost_usd": 0.0125,
                "usage": {"input_tokens": 1200, "output_tokens": 340},
                "result": "done",
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A scripted stand-in for a CLI coding agent (the `command` session backend), for metric-driven benchmarks.

Usage: `metric_agent.py STATE_FILE VALUES FILE PROMPT_FILE`. Diagnosis call n (counted in STATE_FILE) writes
the n-th of the comma-separated VALUES into FILE in its working directory (the candidate worktree), as an
agent tuning one knob would, and answers `patched`; reflection and evolution answer as `fake_agent.py` does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fake_agent import evolve, read_prompt, reflect, result_file


def diagnose(state: Path, values: list[str], target: str) -> dict:
    n = int(state.read_text()) if state.is_file() else 0
    state.write_text(str(n + 1))
    if n >= len(values):
        return {"status": "no_patch", "reason": "the script has no more values to try"}
    Path(target).write_text(values[n] + "\n", encoding="utf-8")
    return {
        "status": "patched",
        "hypothesis": {
            "diagnosis": f"the knob in {target} is not at its best",
            "plan": f"set {target} to {values[n]}",
            "patch_kind": "capability",
            "subtype": "infra",
            "files": [target],
        },
    }


def main() -> int:
    state, values, target, prompt_arg = sys.argv[1:5]
    prompt = read_prompt(prompt_arg)
    if prompt.startswith("# Diagnosis-Patch"):
        answer = diagnose(Path(state), values.split(","), target)
    elif prompt.startswith("# Reflection"):
        answer = reflect(prompt)
    else:
        answer = evolve(prompt)
    result_file(prompt).write_text(json.dumps(answer), encoding="utf-8")
    usage = {"input_tokens": 10, "output_tokens": 5}
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": 1,
                      "total_cost_usd": 0.0, "usage": usage, "result": "done"}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

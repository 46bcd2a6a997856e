"""`llm_judge` through an agent CLI (default `claude -p`): PASS/FAIL of an output against expected_output."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from saddler.errors import BackendError
from saddler.procs import run_process_group

JUDGE_TEMPLATE = "claude -p --output-format json --model {model} -- {prompt}"
PROMPT = (
    "You grade one output of an AI skill. Expected (natural language):\n<expected>\n{expected}\n</expected>\n"
    "Output:\n<output>\n{output}\n</output>\nDoes the output satisfy the expectation? Answer with one JSON "
    'object only: {{"passed": true|false, "evidence": "<short quote or reason>"}}'
)
_OBJECT = re.compile(r"\{[^{}]*\"passed\"[^{}]*\}", re.DOTALL)


class CommandJudge:
    """Callable `(expected, output) -> (passed, evidence)`; an unreadable verdict counts as failed."""

    def __init__(self, template: str = JUDGE_TEMPLATE, model: str = "sonnet", timeout_s: float = 300.0) -> None:
        self.template, self.model, self.timeout_s = template, model, timeout_s

    def __call__(self, expected: str, output: str) -> tuple[bool, str]:
        from saddler.agentcli import build_argv, parse_usage

        prompt = PROMPT.format(expected=expected, output=output[-20000:])
        argv = build_argv(self.template, {"prompt": prompt, "model": self.model})
        if shutil.which(argv[0]) is None:
            raise BackendError(f"judge CLI {argv[0]!r} not found on PATH; install it or use --backend offline")
        proc = run_process_group(argv, cwd=Path.cwd(), timeout_s=self.timeout_s)
        if proc.timed_out:
            return False, f"llm_judge: timeout after {self.timeout_s:g}s"
        final = parse_usage(proc.stdout)["final"] or {}
        text = str(final.get("result") or proc.stdout)
        match = _OBJECT.search(text)
        if match is None:
            return False, f"llm_judge: no verdict in the judge's answer: {text.strip()[:200]}"
        try:
            verdict = json.loads(match.group(0))
        except json.JSONDecodeError:
            return False, f"llm_judge: unreadable verdict: {match.group(0)[:200]}"
        return bool(verdict.get("passed")), f"llm_judge: {verdict.get('evidence', '')}"

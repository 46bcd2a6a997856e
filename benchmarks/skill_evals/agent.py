"""The task agent that "executes" a skill on an eval prompt: Claude through its CLI, or an offline stand-in.

`OfflineSkillAgent` is a STAND-IN, not a model. It makes skill mode runnable end to end without an LLM:
its output is composed deterministically from the SKILL.md lines relevant to the eval prompt (a line is
relevant when it, or its `## ` section heading, shares a content word with the prompt or the attached
files' names), preceded by the attached files' names. Each relevant line is dropped with probability
`omit_rate` (doubled in a section longer than `LONG_SECTION` lines: excess instructions dilute), decided
by a hash of (seed, line), so two runs with different seeds can disagree and the seed's
2-runs-then-majority rule matters. Lines marked required (`**Required**`, `MUST`, `필수`) are
never dropped. Its grading twin for `llm_judge` is `benchmarks.skill_evals.grading.offline_judge`.

`CommandSkillAgent` runs a real agent CLI (default: `claude -p`) with the skill as system prompt and the
eval prompt plus the attached files' contents as the user message; cost is parsed from its JSON output.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from benchmarks.skill_evals.evals import EvalCase
from saddler.errors import BackendError
from saddler.procs import run_process_group

INSTRUCTION = (
    "이 스킬의 지시에 따라 주어진 프롬프트를 수행하라. 결과만 출력하라. (Follow this skill's instructions "
    "to carry out the prompt. Output only the result.)"
)
CLAUDE_TEMPLATE = "claude -p --output-format json --model {model} --system-prompt {system_prompt} -- {prompt}"
_STOP_TEXT = (
    "the and for with that this from into your you are was were will shall have has had not but all any can "
    "its it's each when then than them they their there what which who how use using used one two per via "
    "out only also such should must may"
)
STOPWORDS = frozenset(_STOP_TEXT.split(" "))
LONG_SECTION = 8
_WORD = re.compile(r"[A-Za-z0-9가-힣_]+")


def content_words(text: str) -> set[str]:
    """Lower-cased words of 3+ characters that are not stop words (Hangul words of 2+)."""
    words = set()
    for w in _WORD.findall(text.lower()):
        if (len(w) >= 3 or (len(w) >= 2 and not w.isascii())) and w not in STOPWORDS:
            words.add(w)
    return words


@dataclass
class AgentOutput:
    """What the task agent produced for one eval run."""

    text: str
    cost_usd: float = 0.0
    error: str = ""


class SkillAgent(Protocol):
    """Runs one eval prompt with the skill as instructions."""

    name: str

    def run(self, skill_text: str, case: EvalCase, base_dir: Path, seed: int) -> AgentOutput: ...


def split_body(skill_text: str) -> tuple[list[str], list[str]]:
    """(frontmatter lines incl. fences, body lines) of a SKILL.md; no frontmatter -> ([], all lines)."""
    lines = skill_text.splitlines()
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() == "---":
                return lines[: i + 1], lines[i + 1 :]
    return [], lines


def sections(body: list[str]) -> list[tuple[str, list[str]]]:
    """(H2 heading or "" before the first one, its non-empty content lines) in order; `# ` titles skipped."""
    out: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in body:
        stripped = line.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            out.append((stripped[3:].strip(), []))
        elif stripped and not (not fenced and line.startswith("# ")):
            out[-1][1].append(stripped)
    return out if out[0][1] else out[1:]


def _dropped(seed: int, line: str, rate: float) -> bool:
    digest = hashlib.sha256(f"{seed}\0{line.strip()}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < rate


def is_required(line: str) -> bool:
    """A line the skill marks as a mandatory check item (`**Required**`, an upper-case `MUST`, `필수`)."""
    return "**required" in line.lower() or "필수" in line or re.search(r"\bMUST\b", line) is not None


class OfflineSkillAgent:
    """Deterministic stand-in for the task agent (see the module docstring)."""

    name = "offline"

    def __init__(self, omit_rate: float = 0.25) -> None:
        self.omit_rate = omit_rate

    def run(self, skill_text: str, case: EvalCase, base_dir: Path, seed: int) -> AgentOutput:
        cue = content_words(case.prompt + " " + " ".join(Path(f).stem.replace("-", " ") for f in case.files))
        _, body = split_body(skill_text)
        out = [f"Files: {', '.join(case.files)}"] if case.files else []
        for heading, lines in sections(body):
            heading_hit = bool(content_words(heading) & cue)
            if heading and heading_hit:
                out.append(f"## {heading}")
            rate = self.omit_rate * (2 if len(lines) > LONG_SECTION else 1)
            for stripped in lines:
                if not (heading_hit or content_words(stripped) & cue):
                    continue
                if not is_required(stripped) and _dropped(seed, stripped, rate):
                    continue
                out.append(stripped)
        return AgentOutput("\n".join(out) + "\n")


class CommandSkillAgent:
    """A real task agent through a CLI template (`{prompt}`, `{system_prompt}`, `{model}`); default `claude -p`."""

    name = "claude"

    def __init__(self, template: str = CLAUDE_TEMPLATE, model: str = "sonnet", timeout_s: float = 600.0) -> None:
        self.template, self.model, self.timeout_s = template, model, timeout_s

    def run(self, skill_text: str, case: EvalCase, base_dir: Path, seed: int) -> AgentOutput:
        from saddler.agentcli import build_argv, parse_usage

        attached = []
        for rel in case.files:
            path = base_dir / rel
            body = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else "(missing file)"
            attached.append(f"<file path={rel!r}>\n{body}\n</file>")
        prompt = "\n\n".join([INSTRUCTION, case.prompt, *attached])
        argv = build_argv(self.template, {"prompt": prompt, "system_prompt": skill_text, "model": self.model})
        if shutil.which(argv[0]) is None:
            raise BackendError(f"task agent CLI {argv[0]!r} not found on PATH; install it or use --backend offline")
        env = {**os.environ, "SADDLER_EVAL_SEED": str(seed)}
        proc = run_process_group(argv, cwd=base_dir, env=env, timeout_s=self.timeout_s)
        if proc.timed_out:
            return AgentOutput("", error=f"timeout after {self.timeout_s:g}s")
        usage = parse_usage(proc.stdout)
        final = usage["final"] or {}
        text = str(final.get("result") or proc.stdout)
        error = "" if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
        return AgentOutput(text, float(usage["cost_usd"]), error)

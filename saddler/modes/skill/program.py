"""Skill-mode settings: budgets (the 000 seed's defaults), `program.md` strategies and exclusions, and
`verification-results.json` (capability_issues are mutation targets first; api_issues are never targets and
become exclusions).

program.md (in the workspace) is free Markdown; saddler reads from it:
- `force_at_least_one_iteration: true` on a line of its own;
- strategies: list items `- [type] text` (type = missing | ambiguous | structural | excess) anywhere;
  offline, a strategy whose text quotes an edit is executed literally (see `skill_mutator`);
- exclusions: under `mutation_exclusions:` / `exclusions:`, items `- pattern: "..."` with an optional
  `reason: "..."` line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from saddler.errors import ConfigError

STRATEGY_TYPES = ("missing", "ambiguous", "structural", "excess")
STRATEGY_LABELS = {"missing": "누락", "ambiguous": "모호", "structural": "구조", "excess": "과잉"}
_STRATEGY = re.compile(r"^\s*[-*]\s*\[(missing|ambiguous|structural|excess)\]\s*(.+?)\s*$", re.IGNORECASE)
_PATTERN = re.compile(r"^\s*-\s*pattern:\s*(.+?)\s*$")
_REASON = re.compile(r"^\s*reason:\s*(.+?)\s*$")
_FORCE = re.compile(r"^\s*force_at_least_one_iteration:\s*(true|false|yes|no)\s*$", re.IGNORECASE)


@dataclass
class SkillOptions:
    """Budgets and switches of one skill-mode run (defaults from the 000 seed's table 0-6)."""

    max_iterations: int = 10
    target_pass_rate: float = 1.0
    stall_limit: int = 3
    eval_runs: int = 2
    auto_approve_neutral: bool = False
    seed: int = 0
    backend: str = "offline"  # offline | claude
    model: str = "sonnet"
    omit_rate: float = 0.25

    def check(self) -> None:
        if self.max_iterations < 0 or self.stall_limit < 1 or self.eval_runs < 1:
            raise ConfigError("max_iterations must be >= 0, stall_limit >= 1 and eval_runs >= 1")
        if not 0 <= self.target_pass_rate <= 1:
            raise ConfigError(f"target_pass_rate must be within 0..1, not {self.target_pass_rate}")
        if self.backend not in ("offline", "claude"):
            raise ConfigError(f"--backend must be offline or claude, not {self.backend!r}")


@dataclass(frozen=True)
class Strategy:
    """One program.md strategy: its type and its text (an instruction to the mutator)."""

    type: str
    text: str

    @property
    def key(self) -> str:
        return f"program:{self.type}:{self.text}"


@dataclass(frozen=True)
class Exclusion:
    pattern: str
    reason: str = ""


@dataclass
class Program:
    """What program.md and verification-results.json contribute (empty when both are absent)."""

    used: bool = False
    strategies: list[Strategy] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    force_at_least_one_iteration: bool = False
    capability_issues: list[str] = field(default_factory=list)
    api_issues: list[str] = field(default_factory=list)

    def excluded_by(self, text: str) -> Exclusion | None:
        """The first exclusion whose pattern occurs (case-insensitive) in `text`."""
        low = text.lower()
        return next((e for e in self.exclusions if e.pattern.lower() in low), None)


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def parse_program(text: str) -> Program:
    """Read strategies, exclusions and `force_at_least_one_iteration` from program.md text."""
    program = Program(used=True)
    for line in text.splitlines():
        if m := _FORCE.match(line):
            program.force_at_least_one_iteration = m.group(1).lower() in ("true", "yes")
        elif m := _STRATEGY.match(line):
            program.strategies.append(Strategy(m.group(1).lower(), m.group(2)))
        elif m := _PATTERN.match(line):
            program.exclusions.append(Exclusion(_unquote(m.group(1))))
        elif (m := _REASON.match(line)) and program.exclusions and not program.exclusions[-1].reason:
            program.exclusions[-1] = Exclusion(program.exclusions[-1].pattern, _unquote(m.group(1)))
    return program


_REFERENCES = ("assertion", "assertion_id", "eval", "eval_name")
_DESCRIPTIONS = ("pattern", "description", "issue", "summary", "message", "title")  # first one set describes it


def _description(item: Any) -> str:
    """An issue object's description (its first `_DESCRIPTIONS` key that is set), else ""."""
    return next((str(item[k]) for k in _DESCRIPTIONS if item.get(k)), "") if isinstance(item, dict) else ""


def _issue_text(item: Any) -> str:
    """An issue as one line of text: its description, plus the assertion / eval it names when it names one."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        text = _description(item)
        refs = [str(item[k]) for k in _REFERENCES if isinstance(item.get(k), str | int) and str(item[k])]
        if not text and not refs:
            return json.dumps(item, ensure_ascii=False, sort_keys=True)
        return f"{text} [{', '.join(refs)}]" if refs and text else (text or ", ".join(refs))
    return str(item)


def load_program(workspace: Path) -> Program:
    """program.md and verification-results.json of the workspace, merged (api_issues -> exclusions)."""
    workspace = Path(workspace)
    path = workspace / "program.md"
    program = parse_program(path.read_text(encoding="utf-8")) if path.is_file() else Program()
    vpath = workspace / "verification-results.json"
    if vpath.is_file():
        try:
            data = json.loads(vpath.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{vpath}: invalid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{vpath}: expected an object with capability_issues / api_issues lists")
        program.capability_issues += [_issue_text(i) for i in data.get("capability_issues") or []]
        for item in data.get("api_issues") or []:
            text = _issue_text(item)
            program.api_issues.append(text)
            pattern = _description(item) or text
            program.exclusions.append(
                Exclusion(pattern, "api_issue from verification-results.json: SKILL.md edits cannot fix it")
            )
    return program

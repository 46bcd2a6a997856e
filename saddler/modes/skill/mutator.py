"""Hypotheses and mutations of a SKILL.md: one change per iteration.

`OfflineMutator` follows program.md strategies first (those whose text quotes an edit it can execute
literally), then the 000 seed's Default Mutation Strategy over the failing assertions (`failing_targets`):
those named by a capability issue of verification-results.json first, whatever their level, then the focus
level (L1, then L2 once L1 fully passes, then L3), then the other failing levels; assertions named by an api
issue are never targets. Each target is diagnosed and tried in order: missing (no keyword in SKILL.md: add an
instruction line to the most relevant H2 section), ambiguous (a related line exists but without the keywords:
make it specific), structural (the line exists but sits where the prompt does not reach it, or is dropped in
some runs: move it up / make it a required item), excess (its section is long: remove filler lines); then
fresh variants of the same fixes in every other section, so hypotheses keep coming until the seed's circuit
breaker (stall, target, budget) ends the run. Hypotheses already tried (`state.skip`) and those matching a
mutation exclusion are skipped (the loop checks exclusions again for mutators that do not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from benchmarks.skill_evals.evals import LEVELS, Assertion, EvalSuite
from benchmarks.skill_evals.grading import CaseResult
from saddler.modes.skill import edits as ed
from saddler.modes.skill.program import Program, Strategy

_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")
_SECTION = re.compile(r"##\s*([^\"“”]+?)\s*(?:$|[.;,])")


@dataclass(frozen=True)
class Target:
    """A failing assertion of one eval, with what grading said (grading summaries only, never outputs); `tier`:
    0 named by a capability issue, 1 at the focus level, 2 elsewhere."""

    eval_name: str
    level: str
    prompt: str
    assertion: Assertion
    evidence: str
    run_passes: tuple[bool, ...]
    tier: int = 1

    @property
    def label(self) -> str:
        return f"{self.eval_name}/{self.assertion.id}"


@dataclass
class Mutation:
    """One hypothesis and the SKILL.md it produces."""

    key: str  # identity of the hypothesis (type + target) for "already tried"
    strategy_type: str  # missing | ambiguous | structural | excess
    target: str  # "<assertion id>: <description>"
    analysis: str
    plan: str
    text: str  # the mutated SKILL.md
    source: str = "default"  # default | program | <mutator name>
    cost_usd: float = 0.0  # what proposing it cost (an LLM mutator's session)


@dataclass
class MutationState:
    iteration: int
    attempt: int
    skill_text: str  # the current best SKILL.md
    suite: EvalSuite
    results: list[CaseResult]  # the current best's grading
    program: Program
    skip: set[str] = field(default_factory=set)


class Mutator(Protocol):
    name: str

    def propose(self, state: MutationState) -> Mutation | None: ...


def focus_level(results: list[CaseResult]) -> str | None:
    """L1 while any L1 assertion fails, then L2, then L3; None when everything passes."""
    for level in LEVELS:
        if any(not a["passed"] for r in results if r.case.level == level for a in r.assertions):
            return level
    return None


def names_target(issue: str, eval_name: str, assertion: Assertion) -> bool:
    """True when an issue text names the assertion (its id or eval name as a word, or its description)."""
    low = issue.lower()
    for name in (assertion.id, eval_name):
        if re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", low):
            return True
    return bool(assertion.description) and assertion.description.lower() in low


def failing_targets(results: list[CaseResult], program: Program) -> list[Target]:
    """Every failing assertion not named by an api issue: capability issues' first (any level), then the focus
    level's, then the other levels' in level order."""
    level = focus_level(results)
    targets = []
    for r in results:
        for i, a in enumerate(r.assertions):
            if a["passed"]:
                continue
            assertion = r.case.assertions[i]
            if any(names_target(issue, r.case.name, assertion) for issue in program.api_issues):
                continue
            capability = any(names_target(issue, r.case.name, assertion) for issue in program.capability_issues)
            targets.append(
                Target(
                    r.case.name,
                    r.case.level,
                    r.case.prompt,
                    assertion,
                    str(a["evidence"]),
                    tuple(bool(run.assertions[i]["passed"]) for run in r.runs),
                    0 if capability else (1 if r.case.level == level else 2),
                )
            )
    return sorted(targets, key=lambda t: (t.tier, LEVELS.index(t.level) if t.tier == 2 else 0))


def exclusion_text(m: Mutation, before: str) -> str:
    """What a mutation exclusion pattern is matched against: the plan, the analysis and the added lines."""
    old = set(before.splitlines())
    added = "\n".join(ln for ln in m.text.splitlines() if ln not in old)
    return f"{m.plan}\n{m.analysis}\n{added}"


def program_mutation(text: str, strategy: Strategy) -> Mutation | None:
    """Execute a program.md strategy literally when its text quotes the edit; None when it cannot."""
    quoted = [a or b for a, b in _QUOTED.findall(strategy.text)]
    lines = text.splitlines()
    low = strategy.text.lower()
    section_name = _SECTION.search(strategy.text)
    sec = next((s for s in ed.sections(lines) if section_name and s.heading == section_name.group(1).strip()), None)
    changed: list[str] | None = None
    if low.startswith("add") and quoted:
        changed = ed.insert_in_section(lines, sec, quoted[0] if quoted[0].startswith("- ") else f"- {quoted[0]}")
    elif low.startswith("replace") and len(quoted) >= 2 and quoted[0] in text:
        changed = ed.join(lines, text).replace(quoted[0], quoted[1], 1).splitlines()
    elif low.startswith("remove") and quoted:
        changed = [ln for ln in lines if quoted[0] not in ln]
    elif (low.startswith("move") or low.startswith("make")) and quoted:
        at = ed.find_line(lines, [quoted[0]])
        if at is not None:
            rest = [ln for i, ln in enumerate(lines) if i != at]
            home = sec or ed.section_of(lines, at)
            home = next((s for s in ed.sections(rest) if home and s.heading == home.heading), None)
            changed = ed.insert_in_section(
                rest, home, ed.as_required(lines[at]) if "required" in low else lines[at], at_top=True
            )
    if changed is None or ed.join(changed, text) == text:
        return None
    return Mutation(
        strategy.key,
        strategy.type,
        "program.md strategy",
        f"program.md: {strategy.text}",
        strategy.text,
        ed.join(changed, text),
        source="program",
    )

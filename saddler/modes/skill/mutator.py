"""Hypotheses and mutations of a SKILL.md: one change per iteration.

`OfflineMutator` follows program.md strategies first (those whose text quotes an edit it can execute
literally), then the 000 seed's Default Mutation Strategy over the failing assertions of the focus level
(L1, then L2 once L1 fully passes, then L3), diagnosing each target and trying in order:
missing (no keyword in SKILL.md: add an instruction line to the most relevant H2 section), ambiguous (a
related line exists but without the keywords: make it specific), structural (the line exists but sits
where the prompt does not reach it, or is dropped in some runs: move it up / make it a required item),
excess (its section is long: remove filler lines). Hypotheses already tried (`state.skip`) are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from benchmarks.skill_evals.agent import LONG_SECTION, content_words, is_required
from benchmarks.skill_evals.evals import LEVELS, Assertion, EvalSuite
from benchmarks.skill_evals.grading import CaseResult
from saddler.modes.skill import edits as ed
from saddler.modes.skill.program import STRATEGY_TYPES, Program, Strategy

_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")
_SECTION = re.compile(r"##\s*([^\"“”]+?)\s*(?:$|[.;,])")


@dataclass(frozen=True)
class Target:
    """A failing assertion of one eval, with what grading said (grading summaries only, never outputs)."""

    eval_name: str
    level: str
    prompt: str
    assertion: Assertion
    evidence: str
    run_passes: tuple[bool, ...]

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


def failing_targets(results: list[CaseResult], program: Program) -> list[Target]:
    """Failing assertions of the focus level; those named by capability_issues first."""
    level = focus_level(results)
    targets = []
    for r in results:
        if r.case.level != level:
            continue
        for i, a in enumerate(r.assertions):
            if not a["passed"]:
                assertion = r.case.assertions[i]
                targets.append(
                    Target(
                        r.case.name,
                        r.case.level,
                        r.case.prompt,
                        assertion,
                        str(a["evidence"]),
                        tuple(bool(run.assertions[i]["passed"]) for run in r.runs),
                    )
                )
    issues = " ".join(program.capability_issues).lower()
    return sorted(
        targets,
        key=lambda t: not (issues and (t.assertion.id.lower() in issues or t.assertion.description.lower() in issues)),
    )


def _needles(a: Assertion, expected: str = "") -> list[str]:
    return list(a.keywords) if a.keywords else sorted(content_words(expected or a.description))[:4]


def _locate(lines: list[str], a: Assertion, needles: list[str], expected: str) -> int | None:
    """The SKILL.md line carrying the assertion: a keyword line, or for llm_judge the line sharing the most
    (at least 2) content words with the expected output."""
    if a.keywords:
        return ed.find_line(lines, needles)
    want = content_words(expected or a.description)
    scored = [
        (len(content_words(lines[i]) & want), -i)
        for i in range(ed.body_start(lines), len(lines))
        if not lines[i].startswith("#")
    ]
    top = max(scored, default=(0, 0))
    return -top[1] if top[0] >= 2 else None


def _mutation(key: str, kind: str, t: Target, analysis: str, plan: str, lines: list[str], original: str) -> Mutation:
    return Mutation(
        key, kind, f"{t.assertion.id}: {t.assertion.description or t.label}", analysis, plan, ed.join(lines, original)
    )


def default_candidates(text: str, targets: list[Target], suite: EvalSuite) -> list[tuple[int, Mutation]]:
    """Every default-strategy hypothesis with its priority (diagnosed type first, fallbacks after)."""
    lines = text.splitlines()
    cases = {c.name: c for c in suite.evals}
    all_keywords = [k.lower() for c in suite.evals for a in c.assertions for k in a.keywords]
    out: list[tuple[int, Mutation]] = []
    for order, t in enumerate(targets):
        case = cases[t.eval_name]
        cue = content_words(case.prompt + " " + " ".join(case.files))
        needles = _needles(t.assertion, case.expected_output)
        home = ed.best_section(lines, cue)
        where = f"## {home.heading}" if home else "the end of SKILL.md"
        at = _locate(lines, t.assertion, needles, case.expected_output)
        rank = lambda kind, fallback=False, o=order: (1000 if fallback else 0) + STRATEGY_TYPES.index(kind) * 100 + o  # noqa: E731
        if at is None:
            desc_words = content_words(t.assertion.description + " " + t.assertion.id.replace("_", " "))
            related = next(
                (
                    i
                    for i in range(ed.body_start(lines), len(lines))
                    if not lines[i].startswith("#") and len(content_words(lines[i]) & desc_words) >= 2
                ),
                None,
            )
            topic = " ".join(w for w in re.findall(r"[\w가-힣]+", case.prompt.lower()) if w in cue)[:60].strip()
            new_line = (
                f"- For {topic or t.eval_name} requests: {t.assertion.description or t.assertion.id}"
                f" — always include {' / '.join(needles)}."
            )
            out.append(
                (
                    rank("missing", related is not None),
                    _mutation(
                        f"missing:{t.label}",
                        "missing",
                        t,
                        f"no keyword of {t.assertion.id} ({', '.join(needles)}) appears in SKILL.md: "
                        "the instruction is absent",
                        f"add to {where}: {new_line}",
                        ed.insert_in_section(lines, home, new_line),
                        text,
                    ),
                )
            )
            out.append(
                (
                    rank("structural", True),
                    _mutation(
                        f"structural:{t.label}",
                        "structural",
                        t,
                        f"the instruction for {t.assertion.id} is absent, and a plain line can be skipped",
                        f"add as a required item at the top of {where}: {ed.as_required(new_line)}",
                        ed.insert_in_section(lines, home, ed.as_required(new_line), at_top=True),
                        text,
                    ),
                )
            )
            if related is not None:
                changed = list(lines)
                changed[related] = f"{lines[related].rstrip().rstrip('.')} — specifically: {', '.join(needles)}."
                out.append(
                    (
                        rank("ambiguous"),
                        _mutation(
                            f"ambiguous:{t.label}",
                            "ambiguous",
                            t,
                            f"line {related + 1} covers {t.assertion.id} in general terms "
                            "but names none of its keywords",
                            f"make line {related + 1} specific: name {', '.join(needles)}",
                            changed,
                            text,
                        ),
                    )
                )
            continue
        sec = ed.section_of(lines, at)
        reached = bool(content_words(lines[at]) & cue) or bool(sec and content_words(sec.heading) & cue)
        moved = [ln for i, ln in enumerate(lines) if i != at]
        target_sec = sec if reached else ed.best_section(moved, cue)
        if reached and sec is not None:
            target_sec = ed.section_of(moved, sec.start if sec.start < at else sec.start - 1)
        flaky = "passes in some runs only" if any(t.run_passes) else "is dropped from the output"
        why = f"it {flaky}" if reached else "sits where this prompt does not reach it"
        how = "escalate it to a required item at the top of its section" if reached else f"move it into {where}"
        moved_line = ed.as_required(lines[at]) if reached else lines[at]
        out.append(
            (
                rank("structural"),
                _mutation(
                    f"structural:{t.label}",
                    "structural",
                    t,
                    f"line {at + 1} has the instruction but {why}",
                    f"{how}: {ed.bullet_text(lines[at])[:80]}",
                    ed.insert_in_section(moved, target_sec, moved_line, at_top=True),
                    text,
                ),
            )
        )
        if sec is not None and len(ed.content_lines(lines, sec)) > LONG_SECTION:
            filler = [
                i
                for i in ed.content_lines(lines, sec)
                if not is_required(lines[i]) and not any(k in lines[i].lower() for k in all_keywords) and i != at
            ]
            if filler:
                trimmed = [ln for i, ln in enumerate(lines) if i not in set(filler)]
                out.append(
                    (
                        rank("excess"),
                        _mutation(
                            f"excess:{t.label}",
                            "excess",
                            t,
                            f"## {sec.heading} has {len(ed.content_lines(lines, sec))} lines: "
                            f"filler dilutes line {at + 1}",
                            f"remove {len(filler)} filler line(s) from ## {sec.heading}",
                            trimmed,
                            text,
                        ),
                    )
                )
    return sorted(out, key=lambda p: p[0])


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


class OfflineMutator:
    """Deterministic mutator: program.md strategies, then the default strategy (see the module docstring)."""

    name = "offline"

    def propose(self, state: MutationState) -> Mutation | None:
        for strategy in state.program.strategies:
            if strategy.key not in state.skip:
                mutation = program_mutation(state.skill_text, strategy)
                if mutation is not None:
                    return mutation
        targets = failing_targets(state.results, state.program)
        for _, mutation in default_candidates(state.skill_text, targets, state.suite):
            if mutation.key not in state.skip and mutation.text != state.skill_text:
                return mutation
        return None

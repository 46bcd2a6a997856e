"""The 000 seed's Default Mutation Strategy, offline: every hypothesis for the failing assertions, ranked, and
`OfflineMutator`, which proposes program.md strategies first and then the best untried default hypothesis.

Ranking: by the target's tier (capability issue, focus level, other levels, lowest level first: see
`failing_targets`); within a tier the diagnosed fix of each target comes first, by type (missing, ambiguous,
structural, excess), then the fallbacks, then fresh variants (the same instruction added to, or made a
required item of, each other H2 section) so a hard assertion never runs the run out of hypotheses before its
stall limit does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from benchmarks.skill_evals.agent import LONG_SECTION, content_words, is_required
from benchmarks.skill_evals.evals import LEVELS, Assertion, EvalCase, EvalSuite
from saddler.modes.skill import edits as ed
from saddler.modes.skill.mutator import (
    Mutation,
    MutationState,
    Target,
    exclusion_text,
    failing_targets,
    program_mutation,
)
from saddler.modes.skill.program import STRATEGY_TYPES

TIER = 100_000
LEVEL = 10_000
FALLBACK = 1_000
VARIANT = 50_000


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


@dataclass
class _Builder:
    """Hypotheses for one target on one SKILL.md text (collected into `out` with their ranks)."""

    text: str
    lines: list[str]
    t: Target
    case: EvalCase
    order: int
    out: list[tuple[int, Mutation]]

    def add(self, rank: int, key: str, kind: str, analysis: str, plan: str, lines: list[str]) -> None:
        target = f"{self.t.assertion.id}: {self.t.assertion.description or self.t.label}"
        mutation = Mutation(key, kind, target, analysis, plan, ed.join(lines, self.text))
        level = LEVELS.index(self.t.level) * LEVEL if self.t.tier == 2 else 0  # other levels: lowest first
        self.out.append((self.t.tier * TIER + level + rank, mutation))

    def rank(self, kind: str, fallback: bool = False) -> int:
        return (FALLBACK if fallback else 0) + STRATEGY_TYPES.index(kind) * 100 + self.order

    @property
    def cue(self) -> set[str]:
        return content_words(self.case.prompt + " " + " ".join(self.case.files))

    def new_line(self, needles: list[str]) -> str:
        """An instruction line for the target, worded with the prompt's topic so the prompt reaches it."""
        cue = self.cue
        topic = " ".join(w for w in re.findall(r"[\w가-힣]+", self.case.prompt.lower()) if w in cue)[:60].strip()
        a = self.t.assertion
        what = a.description or a.id
        return f"- For {topic or self.t.eval_name} requests: {what} — always include {' / '.join(needles)}."


def _absent(b: _Builder, needles: list[str], home: ed.Section | None, where: str) -> None:
    """The target's keywords are nowhere in SKILL.md: add the instruction (or make a related line specific)."""
    lines, t = b.lines, b.t
    desc_words = content_words(t.assertion.description + " " + t.assertion.id.replace("_", " "))
    related = next(
        (
            i
            for i in range(ed.body_start(lines), len(lines))
            if not lines[i].startswith("#") and len(content_words(lines[i]) & desc_words) >= 2
        ),
        None,
    )
    new_line = b.new_line(needles)
    b.add(
        b.rank("missing", related is not None),
        f"missing:{t.label}",
        "missing",
        f"no keyword of {t.assertion.id} ({', '.join(needles)}) appears in SKILL.md: the instruction is absent",
        f"add to {where}: {new_line}",
        ed.insert_in_section(lines, home, new_line),
    )
    b.add(
        b.rank("structural", True),
        f"structural:{t.label}",
        "structural",
        f"the instruction for {t.assertion.id} is absent, and a plain line can be skipped",
        f"add as a required item at the top of {where}: {ed.as_required(new_line)}",
        ed.insert_in_section(lines, home, ed.as_required(new_line), at_top=True),
    )
    if related is not None:
        changed = list(lines)
        changed[related] = f"{lines[related].rstrip().rstrip('.')} — specifically: {', '.join(needles)}."
        b.add(
            b.rank("ambiguous"),
            f"ambiguous:{t.label}",
            "ambiguous",
            f"line {related + 1} covers {t.assertion.id} in general terms but names none of its keywords",
            f"make line {related + 1} specific: name {', '.join(needles)}",
            changed,
        )


def _present(b: _Builder, at: int, where: str, all_keywords: list[str]) -> None:
    """The instruction is in SKILL.md at line `at` but the output misses it: move / escalate it, or trim."""
    lines, t, cue = b.lines, b.t, b.cue
    sec = ed.section_of(lines, at)
    reached = bool(content_words(lines[at]) & cue) or bool(sec and content_words(sec.heading) & cue)
    moved = [ln for i, ln in enumerate(lines) if i != at]
    target_sec = sec if reached else ed.best_section(moved, cue)
    if reached and sec is not None:
        target_sec = ed.section_of(moved, sec.start if sec.start < at else sec.start - 1)
    flaky = "passes in some runs only" if any(t.run_passes) else "is dropped from the output"
    why = f"it {flaky}" if reached else "sits where this prompt does not reach it"
    how = "escalate it to a required item at the top of its section" if reached else f"move it into {where}"
    b.add(
        b.rank("structural"),
        f"structural:{t.label}",
        "structural",
        f"line {at + 1} has the instruction but {why}",
        f"{how}: {ed.bullet_text(lines[at])[:80]}",
        ed.insert_in_section(moved, target_sec, ed.as_required(lines[at]) if reached else lines[at], at_top=True),
    )
    if sec is None or len(ed.content_lines(lines, sec)) <= LONG_SECTION:
        return
    filler = [
        i
        for i in ed.content_lines(lines, sec)
        if not is_required(lines[i]) and not any(k in lines[i].lower() for k in all_keywords) and i != at
    ]
    if filler:
        b.add(
            b.rank("excess"),
            f"excess:{t.label}",
            "excess",
            f"## {sec.heading} has {len(ed.content_lines(lines, sec))} lines: filler dilutes line {at + 1}",
            f"remove {len(filler)} filler line(s) from ## {sec.heading}",
            [ln for i, ln in enumerate(lines) if i not in set(filler)],
        )


def _variants(b: _Builder, needles: list[str], home: ed.Section | None) -> None:
    """Fresh hypotheses once the diagnosed ones are spent: the instruction in each other section, plain
    (missing) or as a required item (structural), most relevant sections first."""
    lines, t = b.lines, b.t
    new_line = b.new_line(needles)
    others = [s for s in ed.sections(lines) if s.heading and (home is None or s.heading != home.heading)]
    cue = b.cue
    others.sort(key=lambda s: -len(content_words(" ".join(lines[s.start : s.end])) & cue))
    for pos, sec in enumerate(others):
        base = VARIANT + b.order * 1_000 + pos * 10
        b.add(
            base,
            f"missing:{t.label}@{sec.heading}",
            "missing",
            f"{t.assertion.id} still fails with the diagnosed fixes tried: state it where ## {sec.heading} says it",
            f"add to ## {sec.heading}: {new_line}",
            ed.insert_in_section(lines, sec, new_line),
        )
        b.add(
            base + 1,
            f"structural:{t.label}@{sec.heading}",
            "structural",
            f"{t.assertion.id} still fails with the diagnosed fixes tried: make it a required check of "
            f"## {sec.heading}",
            f"add as a required item at the top of ## {sec.heading}: {ed.as_required(new_line)}",
            ed.insert_in_section(lines, sec, ed.as_required(new_line), at_top=True),
        )


def default_candidates(text: str, targets: list[Target], suite: EvalSuite) -> list[tuple[int, Mutation]]:
    """Every default-strategy hypothesis with its priority (see the module docstring), lowest first."""
    lines = text.splitlines()
    cases = {c.name: c for c in suite.evals}
    all_keywords = [k.lower() for c in suite.evals for a in c.assertions for k in a.keywords]
    out: list[tuple[int, Mutation]] = []
    for order, t in enumerate(targets):
        case = cases[t.eval_name]
        b = _Builder(text, lines, t, case, order, out)
        needles = _needles(t.assertion, case.expected_output)
        home = ed.best_section(lines, b.cue)
        where = f"## {home.heading}" if home else "the end of SKILL.md"
        at = _locate(lines, t.assertion, needles, case.expected_output)
        if at is None:
            _absent(b, needles, home, where)
        else:
            _present(b, at, where, all_keywords)
        _variants(b, needles, home)
    return sorted(out, key=lambda p: p[0])


class OfflineMutator:
    """Deterministic mutator: program.md strategies, then the default strategy (see the module docstring);
    hypotheses already tried or matching a mutation exclusion are never proposed."""

    name = "offline"

    def propose(self, state: MutationState) -> Mutation | None:
        for strategy in state.program.strategies:
            if strategy.key not in state.skip:
                mutation = program_mutation(state.skill_text, strategy)
                if mutation is not None:
                    return mutation
        targets = failing_targets(state.results, state.program)
        for _, mutation in default_candidates(state.skill_text, targets, state.suite):
            if mutation.key in state.skip or mutation.text == state.skill_text:
                continue
            if state.program.excluded_by(exclusion_text(mutation, state.skill_text)) is None:
                return mutation
        return None

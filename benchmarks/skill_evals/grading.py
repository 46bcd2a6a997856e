"""Grading eval outputs against assertions, and the 000 seed's multi-run rule.

- `keyword`: pass when any keyword occurs in the output (case-insensitive); evidence = the matched excerpt.
- `llm_judge`: a judge callable decides from `expected_output` (or the assertion's description). Offline
  it is `offline_judge`, a documented heuristic stand-in: pass when at least half of the expected text's
  content words occur in the output.
- `run_case`: eval_runs (2) runs; when they disagree on any assertion a third run, then the majority
  per assertion (2 of 3) decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.skill_evals.agent import AgentOutput, SkillAgent, content_words
from benchmarks.skill_evals.evals import Assertion, EvalCase

Judge = Callable[[str, str], tuple[bool, str]]  # (expected, output) -> (passed, evidence)
JUDGE_THRESHOLD = 0.5


def excerpt(text: str, start: int, end: int, margin: int = 40) -> str:
    """The matched span with some context, on one line."""
    lo, hi = max(0, start - margin), min(len(text), end + margin)
    return " ".join(text[lo:hi].split())


def offline_judge(expected: str, output: str) -> tuple[bool, str]:
    """Stand-in for an LLM judge: overlap of the expected text's content words with the output's."""
    want = content_words(expected)
    if not want:
        return False, "offline llm_judge stand-in: expected_output has no content words"
    have = want & content_words(output)
    ratio = len(have) / len(want)
    return ratio >= JUDGE_THRESHOLD, (
        f"offline llm_judge stand-in: {len(have)}/{len(want)} expected words present ({', '.join(sorted(have)[:8])})"
    )


def grade_assertion(assertion: Assertion, case: EvalCase, output: str, judge: Judge) -> dict[str, Any]:
    """`{"id", "passed", "evidence"}` for one assertion on one output."""
    if assertion.check == "keyword":
        low = output.lower()
        for kw in assertion.keywords:
            pos = low.find(kw.lower())
            if pos >= 0:
                return {"id": assertion.id, "passed": True, "evidence": excerpt(output, pos, pos + len(kw))}
        return {
            "id": assertion.id,
            "passed": False,
            "evidence": f"none of {', '.join(assertion.keywords)} in the output",
        }
    passed, evidence = judge(case.expected_output or assertion.description, output)
    return {"id": assertion.id, "passed": passed, "evidence": evidence}


@dataclass
class RunGrade:
    """One run of one eval: the agent's output and each assertion's grade."""

    run: int
    seed: int
    output: AgentOutput
    assertions: list[dict[str, Any]]

    @property
    def vector(self) -> tuple[bool, ...]:
        return tuple(bool(a["passed"]) for a in self.assertions)


@dataclass
class CaseResult:
    """An eval's final verdict after the multi-run rule."""

    case: EvalCase
    runs: list[RunGrade]
    assertions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pass_rate(self) -> float:
        return sum(a["passed"] for a in self.assertions) / len(self.assertions) if self.assertions else 0.0

    @property
    def passed_map(self) -> dict[str, bool]:
        return {a["id"]: bool(a["passed"]) for a in self.assertions}

    def grading_json(self) -> dict[str, Any]:
        """The seed's grading.json (final verdict), plus every run's grades under `runs`."""
        return {
            "eval_id": self.case.id, "eval_name": self.case.name, "level": self.case.level, "run": len(self.runs),
            "assertions": self.assertions, "pass_rate": round(self.pass_rate, 4),
            "runs": [{"run": r.run, "seed": r.seed, "assertions": r.assertions, "error": r.output.error}
                     for r in self.runs],
        }  # fmt: skip


def grade_run(
    agent: SkillAgent, skill_text: str, case: EvalCase, base_dir: Path, run: int, seed: int, judge: Judge
) -> RunGrade:
    output = agent.run(skill_text, case, base_dir, seed)
    return RunGrade(run, seed, output, [grade_assertion(a, case, output.text, judge) for a in case.assertions])


def majority(runs: list[RunGrade]) -> list[dict[str, Any]]:
    """Per assertion: passed when more than half the runs passed it; evidence from a run that agrees."""
    final = []
    for i, first in enumerate(runs[0].assertions):
        votes = [r.assertions[i] for r in runs]
        passed = sum(v["passed"] for v in votes) * 2 > len(votes)
        agreeing = next(v for v in votes if bool(v["passed"]) == passed)
        final.append({"id": first["id"], "passed": passed, "evidence": agreeing["evidence"]})
    return final


def run_case(
    agent: SkillAgent,
    skill_text: str,
    case: EvalCase,
    base_dir: Path,
    seeds: list[int],
    judge: Judge,
    eval_runs: int = 2,
) -> CaseResult:
    """Run `eval_runs` times (seeds[0..]); on any disagreement one more run; the majority decides."""
    runs = [grade_run(agent, skill_text, case, base_dir, i + 1, seeds[i], judge) for i in range(eval_runs)]
    if len({r.vector for r in runs}) > 1 and len(seeds) > eval_runs:
        runs.append(grade_run(agent, skill_text, case, base_dir, eval_runs + 1, seeds[eval_runs], judge))
    return CaseResult(case, runs, majority(runs))

"""The 000 seed's decision table (the `assertion_veto` policy), circuit breaker, program.md / verification-results
parsing and the mutator."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from repo_paths import FIXTURES

from benchmarks.skill_evals.agent import OfflineSkillAgent
from benchmarks.skill_evals.evals import load_evals
from benchmarks.skill_evals.grading import CaseResult, offline_judge, run_case
from saddler.harness.structure import check_skill_text
from saddler.modes.skill.default_strategy import OfflineMutator, default_candidates
from saddler.modes.skill.mutator import MutationState, failing_targets, focus_level, program_mutation
from saddler.modes.skill.program import Exclusion, Program, SkillOptions, Strategy, load_program, parse_program
from saddler.modes.skill.rules import stop_reason
from saddler.policies.seed_acceptance import AssertionVeto

FIXTURE = FIXTURES / "skill"  # the fixture skill data (read, never written)

SKILL = (FIXTURE / "code-review" / "SKILL.md").read_text(encoding="utf-8")
SUITE = load_evals(FIXTURE / "code-review-workspace" / "evals" / "evals.json")


decide = AssertionVeto().decide


def test_decision_table_rows() -> None:
    best = {"a": True, "b": False, "c": False}
    assert decide(0.75, 0.5, {"a": True, "b": True, "c": False}, best, False).decision == "KEEP"
    # the mean rises but a passing assertion now fails: DISCARD
    up_with_regression = decide(0.75, 0.5, {"a": False, "b": True, "c": True}, best, False)
    assert (up_with_regression.decision, up_with_regression.regressions) == ("DISCARD", ["a"])
    assert decide(0.5, 0.5, {"a": True, "b": False, "c": False}, best, True).decision == "NEUTRAL"
    assert decide(0.5, 0.5, {"a": True, "b": False, "c": False}, best, False).decision == "DISCARD"
    assert decide(0.5, 0.5, {"a": False, "b": True, "c": False}, best, True).decision == "DISCARD"
    assert decide(0.25, 0.5, {"a": True, "b": False, "c": False}, best, True).decision == "DISCARD"
    kept = decide(0.75, 0.5, {"a": True, "b": True, "c": False}, best, False)
    assert kept.gained == ["b"] and kept.regressions == []


@given(
    new=st.dictionaries(st.sampled_from("abcdef"), st.booleans(), min_size=1),
    best=st.dictionaries(st.sampled_from("abcdef"), st.booleans(), min_size=1),
    rates=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    program=st.booleans(),
)
def test_keep_never_hides_a_regression(
    new: dict[str, bool], best: dict[str, bool], rates: tuple[float, float], program: bool
) -> None:
    verdict = decide(rates[0], rates[1], new, best, program)
    if verdict.decision in ("KEEP", "NEUTRAL"):
        assert verdict.regressions == []
        assert all(new.get(k, False) for k, ok in best.items() if ok)
    if verdict.decision == "KEEP":
        assert rates[0] > rates[1]
    if verdict.decision == "NEUTRAL":
        assert program and abs(rates[0] - rates[1]) <= 1e-9


def test_circuit_breaker() -> None:
    opts = SkillOptions(max_iterations=5, target_pass_rate=0.9, stall_limit=3)
    none = Program()
    assert stop_reason(0, opts, 0.5, 0, none, set()) is None
    assert stop_reason(2, opts, 0.5, 3, none, set()) == "stall_limit"
    assert stop_reason(0, opts, 0.95, 0, none, set()) == "target_achieved"
    assert stop_reason(5, opts, 0.5, 0, none, set()) == "max_iterations"
    forced = Program(
        used=True, strategies=[Strategy("structural", 'Make "x" required')], force_at_least_one_iteration=True
    )
    assert stop_reason(0, opts, 1.0, 0, forced, set()) is None
    assert stop_reason(1, opts, 1.0, 0, forced, set()) is None
    assert stop_reason(1, opts, 1.0, 0, forced, {forced.strategies[0].key}) == "target_achieved"


def test_program_md_and_verification_results(tmp_path: Path) -> None:
    (tmp_path / "program.md").write_text(
        "# program\n\nforce_at_least_one_iteration: true\n\n## Strategies\n"
        '- [structural] Make "Fast Mode" required\n- [missing] Add "Name the rollback plan." under ## Verdict\n\n'
        'mutation_exclusions:\nexclusions:\n  - pattern: "string → number 타입 변환 workaround"\n'
        '    reason: "API 스키마 수정이 선행되어야 함"\n',
        encoding="utf-8",
    )
    (tmp_path / "verification-results.json").write_text(
        json.dumps(
            {"capability_issues": [{"description": "verdict line missing"}], "api_issues": ["HTTP 500 from /reviews"]}
        ),
        encoding="utf-8",
    )
    program = load_program(tmp_path)
    assert program.used and program.force_at_least_one_iteration
    assert program.strategies == [
        Strategy("structural", 'Make "Fast Mode" required'),
        Strategy("missing", 'Add "Name the rollback plan." under ## Verdict'),
    ]
    assert program.exclusions[0] == Exclusion("string → number 타입 변환 workaround", "API 스키마 수정이 선행되어야 함")
    assert program.exclusions[1].pattern == "HTTP 500 from /reviews"
    assert program.capability_issues == ["verdict line missing"]
    assert program.excluded_by("... a STRING → NUMBER 타입 변환 workaround ...") == program.exclusions[0]
    assert parse_program("nothing here").strategies == []


def test_program_strategies_execute_literally() -> None:
    add = program_mutation(SKILL, Strategy("missing", 'Add "Name the rollback plan." under ## Verdict'))
    assert add is not None and add.source == "program"
    assert "- Close the review with a verdict line.\n- Name the rollback plan.\n" in add.text
    req = program_mutation(SKILL, Strategy("structural", 'Make "Fast Mode" required'))
    assert req is not None
    assert "## Routing\n\n- **Required:** A single file review uses Fast Mode.\n- A large change" in req.text
    assert program_mutation(SKILL, Strategy("excess", "Tidy things up")) is None
    for m in (add, req):
        assert check_skill_text("SKILL.md", m.text, SKILL) == []


def _results(text: str) -> list[CaseResult]:
    agent = OfflineSkillAgent()
    return [run_case(agent, text, c, SUITE.base_dir, [11, 12, 13], offline_judge) for c in SUITE.evals]


def test_default_strategy_focuses_the_lowest_failing_level_and_orders_types() -> None:
    results = _results(SKILL)
    level = focus_level(results)
    everything = failing_targets(results, Program())
    focused = [t.level == level for t in everything]
    assert focused and focused == sorted(focused, reverse=True)  # the focus level first, then the others
    targets = [t for t in everything if t.level == level]
    kinds = [m.strategy_type for _, m in default_candidates(SKILL, targets, SUITE)]
    order = ["missing", "ambiguous", "structural", "excess"]
    primary = [k for k in kinds[: len(targets)]]
    assert primary == sorted(primary, key=order.index)
    for _, m in default_candidates(SKILL, targets, SUITE):
        assert check_skill_text("SKILL.md", m.text, SKILL) == [], m.plan
        assert m.text != SKILL


def test_ambiguous_instruction_is_made_specific() -> None:
    results = _results(SKILL)
    targets = [t for t in failing_targets(results, Program()) if t.assertion.id == "security_vectors"]
    assert targets, "the fixture's security assertion fails at baseline"
    cands = {m.strategy_type: m for _, m in default_candidates(SKILL, targets, SUITE)}
    assert "- Check security of the change — specifically: SQL injection, XSS." in cands["ambiguous"].text
    assert "SQL injection" in cands["missing"].text


def test_offline_mutator_skips_tried_hypotheses() -> None:
    results = _results(SKILL)
    mutator = OfflineMutator()
    state = MutationState(1, 0, SKILL, SUITE, results, Program())
    first = mutator.propose(state)
    assert first is not None
    state.skip.add(first.key)
    second = mutator.propose(state)
    assert second is not None and second.key != first.key


def test_capability_issues_put_their_assertions_first() -> None:
    results = _results(SKILL)
    plain = [t.assertion.id for t in failing_targets(results, Program())]
    assert len(plain) >= 2
    last = plain[-1]
    ordered = [t.assertion.id for t in failing_targets(results, Program(capability_issues=[f"{last} is flaky"]))]
    assert ordered[0] == last and sorted(ordered) == sorted(plain)

"""Where skill mode's hypotheses come from (the 000 seed's 0-5, 2-2 and 2-7): capability issues from
verification-results.json are mutation targets whatever their level, api issues are not; when the focus
level has nothing left to try, the other failing assertions are; the run ends on stall, target or budget
with the seed's own words, never early while a fixable failure remains."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from benchmarks.skill_evals.agent import OfflineSkillAgent
from benchmarks.skill_evals.evals import load_evals
from benchmarks.skill_evals.grading import CaseResult, offline_judge, run_case
from evodag.store import EvoDAG
from saddler.modes.skill.default_strategy import OfflineMutator
from saddler.modes.skill.loop import SkillRun
from saddler.modes.skill.mutator import Mutation, MutationState, failing_targets
from saddler.modes.skill.program import Program, SkillOptions, load_program

FIXTURE = FIXTURES / "skill"  # the fixture skill data (read, never written)

WORKSPACES = FIXTURES / "skill_workspaces"
SKILL = (FIXTURE / "code-review" / "SKILL.md").read_text(encoding="utf-8")
SUITE = load_evals(FIXTURE / "code-review-workspace" / "evals" / "evals.json")


def _results(text: str, omit_rate: float) -> list[CaseResult]:
    agent = OfflineSkillAgent(omit_rate)
    return [run_case(agent, text, c, SUITE.base_dir, [11, 12, 13], offline_judge) for c in SUITE.evals]


def _workspace(tmp_path: Path, *files: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in files:
        shutil.copyfile(WORKSPACES / name, ws / ("program.md" if name.endswith(".md") else name))
    return ws


def _log(ws: Path) -> dict[str, object]:
    return json.loads((ws / "autoresearch-log.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_targets_capability_issues_first_then_the_focus_level_then_the_rest(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "verification-results.json")
    program = load_program(ws)
    results = _results(SKILL, 0.5)  # L1 (fast_mode) fails: the focus level
    failing = {f"{r.case.name}/{a['id']}": r.case.level for r in results for a in r.assertions if not a["passed"]}
    assert failing["single-file-routing/fast_mode"] == "L1-routing"
    assert failing["migration-rollback/rollback_plan"] == "L3-quality"
    labels = [t.label for t in failing_targets(results, program)]
    assert labels[0] == "migration-rollback/rollback_plan"  # the L3 capability issue, not left for later
    assert labels[1] == "single-file-routing/fast_mode"  # then the focus level
    assert sorted(labels) == sorted(failing)  # and every other failing assertion after them
    api_only = Program(api_issues=["fast_mode: routing comes from the review server (HTTP 500 on /route)"])
    assert "single-file-routing/fast_mode" not in [t.label for t in failing_targets(results, api_only)]


def test_an_l3_capability_issue_is_tried_in_the_first_iteration(
    tmp_path: Path, skill_repo: Callable[..., Path]
) -> None:
    ws = _workspace(tmp_path, "verification-results.json")
    out = SkillRun(skill_repo(tmp_path), ws, SkillOptions(max_iterations=10, omit_rate=0.5)).run()
    log = _log(ws)
    first = log["iterations"][0]  # type: ignore[index]
    assert first["target"].startswith("rollback_plan")
    assert out.final_pass_rate > out.baseline_pass_rate


def test_strategies_exhausted_never_ends_a_run_with_fixable_failures(
    tmp_path: Path, skill_repo: Callable[..., Path]
) -> None:
    """Routing fixes are excluded (the review server decides it): before, the run stopped after 1 of 10
    iterations with `strategies_exhausted` at 0.0 while L2 and L3 failures were fixable by SKILL.md edits.
    Now they are all fixed, and only then is the excluded L1 failure left with no hypothesis."""
    ws = _workspace(tmp_path, "program-routing-excluded.md")
    lines: list[str] = []
    out = SkillRun(skill_repo(tmp_path), ws, SkillOptions(max_iterations=10, omit_rate=0.5), say=lines.append).run()
    assert out.baseline_pass_rate == 0.0 and out.final_pass_rate == 0.75 and out.kept == 4
    log = _log(ws)
    targets = [e["target"].split(":")[0] for e in log["iterations"]]  # type: ignore[attr-defined]
    assert targets[:2] == ["security_vectors", "verdict"]  # L2 before L3 once L1 has nothing left
    assert {"security_vectors", "verdict", "rollback_plan", "expected_output"} <= set(targets)
    assert "fast_mode" not in targets
    assert out.termination_reason == "strategies_exhausted"  # only the excluded routing failure is left
    assert lines[-2].startswith("시도할 가설이 남지 않았습니다") and "single-file-routing/fast_mode" in lines[-2]


def test_fresh_hypotheses_keep_coming_until_the_seed_stops_the_run(
    tmp_path: Path, skill_repo: Callable[..., Path]
) -> None:
    """A mutator whose every idea is discarded still has new ones: the run ends by the stall limit, with the
    seed's message, not by running out of hypotheses."""
    lines: list[str] = []
    out = SkillRun(
        skill_repo(tmp_path),
        tmp_path / "ws",
        SkillOptions(max_iterations=10, stall_limit=6, omit_rate=0.5),
        mutator=Unhelpful(),
        say=lines.append,
    ).run()
    assert out.termination_reason == "stall_limit" and out.iterations == 6
    assert "연속 6회 개선 없음. 다른 전략이 필요합니다." in lines


class Unhelpful(OfflineMutator):
    """The offline mutator's hypotheses, each made useless (the added text is reversed): always discarded."""

    def propose(self, state: MutationState) -> Mutation | None:
        m = super().propose(state)
        if m is None:
            return None
        added = [ln for ln in m.text.splitlines() if ln not in state.skill_text.splitlines()]
        text = state.skill_text.rstrip("\n") + "\n" + "\n".join(f"- {ln[::-1]}" for ln in added) + "\n"
        return replace(m, text=text)


@pytest.mark.parametrize(
    ("opts", "expected"),
    [
        (SkillOptions(max_iterations=10), "목표 pass_rate 1.0 달성!"),
        (SkillOptions(max_iterations=2), "최대 iteration 수 도달."),
        (SkillOptions(max_iterations=10, target_pass_rate=0.2), "목표 pass_rate 0.2 달성!"),
    ],
)
def test_the_circuit_breaker_speaks_the_seeds_words(
    tmp_path: Path, opts: SkillOptions, expected: str, skill_repo: Callable[..., Path]
) -> None:
    lines: list[str] = []
    SkillRun(skill_repo(tmp_path), tmp_path / "ws", opts, say=lines.append).run()
    assert expected in lines
    assert any(line.startswith("베이스라인 측정 완료:\n- Mean pass rate: ") for line in lines)


def test_the_forced_run_ends_after_every_program_strategy(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "program.md").write_text(
        'force_at_least_one_iteration: true\n\n- [structural] Make "Fast Mode" required\n', encoding="utf-8"
    )
    lines: list[str] = []
    SkillRun(skill_repo(tmp_path), ws, SkillOptions(target_pass_rate=0.2), say=lines.append).run()
    assert "목표 pass_rate 0.2 달성! 모든 program.md 전략을 시도한 후 종료" in lines
    with EvoDAG(ws / "evodag.sqlite", readonly=True) as store:
        assert store.get_run().termination_reason == "target_achieved"

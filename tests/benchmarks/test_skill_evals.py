"""skill-evals: evals.json in the 000 seed's schema, keyword / llm_judge grading, the 2-runs-then-majority rule,
the offline stand-in agent and the Benchmark contract."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from repo_paths import FIXTURES

from benchmarks.skill_evals import SkillEvalsBenchmark
from benchmarks.skill_evals.agent import AgentOutput, OfflineSkillAgent, is_required
from benchmarks.skill_evals.evals import Assertion, EvalCase, load_evals, parse_evals
from benchmarks.skill_evals.grading import grade_assertion, offline_judge, run_case
from saddler.errors import ConfigError

FIXTURE = FIXTURES / "skill"  # the fixture skill data (read, never written)

EVALS = FIXTURE / "code-review-workspace" / "evals" / "evals.json"
SKILL = (FIXTURE / "code-review" / "SKILL.md").read_text(encoding="utf-8")


def test_seed_schema_is_read_as_written() -> None:
    suite = load_evals(EVALS)
    assert suite.skill_name == "code-review"
    assert [e.name for e in suite.evals] == [
        "single-file-routing",
        "login-security",
        "migration-rollback",
        "findings-format",
    ]
    assert [e.level for e in suite.evals] == ["L1-routing", "L2-execution", "L3-quality", "L3-quality"]
    assert suite.evals[1].assertions[0] == Assertion(
        "security_vectors", "check security vectors by name", "keyword", ("SQL injection", "XSS")
    )
    assert suite.evals[0].files == ("test-targets/single.py",)
    assert suite.base_dir == FIXTURE
    # no assertions => llm_judge on expected_output, with a warning
    assert suite.evals[3].assertions == (
        Assertion("expected_output", "Findings are listed as bullets with file and line.", "llm_judge"),
    )
    assert len(suite.warnings) == 1 and "findings-format" in suite.warnings[0]
    assert suite.assertion_count() == 5


def test_level_defaults_to_l1_routing(tmp_path: Path) -> None:
    data = {
        "evals": [
            {"id": 1, "name": "a", "prompt": "p", "assertions": [{"id": "x", "check": "keyword", "keywords": ["k"]}]}
        ]
    }
    suite = parse_evals(data, tmp_path / "s-workspace" / "evals" / "evals.json")
    assert suite.evals[0].level == "L1-routing"
    assert suite.skill_name == "s"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["evals"][0].pop("prompt"), "evals[0]: missing 'prompt'"),
        (lambda d: d["evals"][0].update(level="L4"), "level must be one of"),
        (lambda d: d["evals"][0]["assertions"][0].update(check="regex"), "evals[0].assertions[0]: check must be"),
        (lambda d: d["evals"][0]["assertions"][0].update(keywords=[]), "needs at least one keyword"),
        (lambda d: d["evals"].append(dict(d["evals"][0])), "duplicate eval name"),
    ],
)
def test_schema_errors_name_the_field(mutate: Callable[[dict[str, Any]], object], message: str) -> None:
    data = json.loads(EVALS.read_text(encoding="utf-8"))
    mutate(data)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_evals(data, EVALS)


def test_keyword_assertion_passes_on_any_keyword_with_excerpt_evidence() -> None:
    case = load_evals(EVALS).evals[1]
    got = grade_assertion(case.assertions[0], case, "We checked for xss in the form.\nNothing else.", offline_judge)
    assert got == {
        "id": "security_vectors",
        "passed": True,
        "evidence": "We checked for xss in the form. Nothing else.",
    }
    miss = grade_assertion(case.assertions[0], case, "looks fine", offline_judge)
    assert miss == {"id": "security_vectors", "passed": False, "evidence": "none of SQL injection, XSS in the output"}


def test_offline_judge_is_an_overlap_heuristic() -> None:
    ok, evidence = offline_judge(
        "Findings are listed as bullets with file and line.", "- findings: parser.py line 3, file ok"
    )
    assert ok and evidence.startswith("offline llm_judge stand-in: 3/5")
    assert offline_judge("Findings are listed as bullets with file and line.", "nothing") == (
        False,
        "offline llm_judge stand-in: 0/5 expected words present ()",
    )


class Scripted:
    """A task agent whose output per seed is given: lets a test decide when runs disagree."""

    name = "scripted"

    def __init__(self, outputs: dict[int, str]) -> None:
        self.outputs, self.calls = outputs, list[int]()

    def run(self, skill_text: str, case: EvalCase, base_dir: Path, seed: int) -> AgentOutput:
        self.calls.append(seed)
        return AgentOutput(self.outputs[seed])


def test_two_agreeing_runs_decide_without_a_third() -> None:
    case = load_evals(EVALS).evals[1]
    agent = Scripted({1: "SQL injection", 2: "XSS here", 3: "APPROVE"})
    result = run_case(agent, SKILL, case, FIXTURE, [1, 2, 3], offline_judge)
    assert agent.calls == [1, 2]
    assert result.passed_map == {"security_vectors": True, "verdict": False}
    assert result.pass_rate == 0.5
    assert result.grading_json()["run"] == 2


def test_disagreement_adds_a_third_run_and_the_majority_decides() -> None:
    case = load_evals(EVALS).evals[1]
    agent = Scripted({1: "SQL injection APPROVE", 2: "XSS", 3: "nothing"})
    result = run_case(agent, SKILL, case, FIXTURE, [1, 2, 3], offline_judge)
    assert agent.calls == [1, 2, 3]
    # security_vectors: pass, pass, fail -> pass; verdict: pass, fail, fail -> fail
    assert result.passed_map == {"security_vectors": True, "verdict": False}
    data = result.grading_json()
    assert set(data) >= {"eval_id", "eval_name", "run", "assertions", "pass_rate"}
    assert data["eval_id"] == 2 and data["run"] == 3 and data["pass_rate"] == 0.5
    assert data["assertions"][1] == {
        "id": "verdict",
        "passed": False,
        "evidence": "none of APPROVE, REQUEST_CHANGES in the output",
    }


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**31 - 1))
def test_offline_agent_is_deterministic_and_keeps_required_lines(seed: int) -> None:
    case = load_evals(EVALS).evals[0]
    skill = SKILL.replace(
        "- A single file review uses Fast Mode.", "- **Required:** A single file review uses Fast Mode."
    )
    agent = OfflineSkillAgent(omit_rate=0.9)
    first = agent.run(skill, case, FIXTURE, seed)
    assert first == agent.run(skill, case, FIXTURE, seed)
    assert "**Required:** A single file review uses Fast Mode." in first.text
    assert first.text.startswith("Files: test-targets/single.py\n")
    assert "Look at naming and readability." not in first.text  # no word shared with the prompt


def test_required_marks() -> None:
    assert is_required("- **Required:** do it") and is_required("- You MUST do it") and is_required("- 필수 항목")
    assert not is_required("- you must not shout") and not is_required("- plain")


def test_benchmark_contract_on_a_skill_harness(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    skill_dir = skill_repo(tmp_path, git=False)
    bench = SkillEvalsBenchmark(evals=str(EVALS))
    splits = {s: [t.id for t in bench.tasks(s)] for s in ("train", "dev", "test")}
    assert splits == {
        "train": ["single-file-routing", "login-security", "migration-rollback"],
        "dev": ["findings-format"],
        "test": [],
    }
    task = bench.tasks("train")[1]
    result = bench.run(skill_dir, task, 7, tmp_path / "trace")
    assert result.task_id == "login-security" and not result.passed and result.disposition == "task_failure"
    assert result.score == 0.0 and result.failure_file == "SKILL.md"
    trace = json.loads(Path(result.trace_path or "").read_text(encoding="utf-8"))
    assert [a["id"] for a in trace["assertions"]] == ["security_vectors", "verdict"]
    assert [s.code for s in bench.symptoms(result)] == ["assertion:security_vectors", "assertion:verdict"]
    assert bench.fingerprint() == SkillEvalsBenchmark(evals=str(EVALS)).fingerprint()
    assert bench.fingerprint() != SkillEvalsBenchmark(evals=str(EVALS), omit_rate=0.5).fingerprint()
    missing = bench.run(tmp_path, task, 7, tmp_path / "t2")
    assert missing.disposition == "task_failure" and missing.error_tail == "SKILL.md is missing"

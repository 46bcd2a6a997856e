"""Shared LLM-backend helpers: answer parsing, failed results, globs, the guard policy, retries."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saddler.harness.components import matches as matches_any
from saddler.sessions.agent_edits import changed_files
from saddler.sessions.answers import OutputError, failed_result, llm_origin, parse_result
from saddler.sessions.guard import edit_denial
from saddler.sessions.llm_backend import TransientError, with_retries
from saddler.sessions.schema import LessonOut, ReflectionResult, SessionStats

STATS = SessionStats(backend="t")
lesson = st.builds(
    LessonOut,
    task_id=st.one_of(st.none(), st.text(min_size=1, max_size=12)),
    category=st.sampled_from(["fixed", "regressed", "still_failing", "still_passing", "general"]),
    attribution=st.sampled_from(["true_fix", "true_regression", "stochastic", "uncertain"]),
    text=st.text(max_size=80),
)


@given(st.lists(lesson, max_size=4), st.text(max_size=40), st.sampled_from(["dict", "bare", "fenced"]))
def test_reflection_answer_round_trips(lessons: list[LessonOut], summary: str, shape: str) -> None:
    original = ReflectionResult(lessons=lessons, summary=summary, stats=STATS)
    data = original.model_dump(exclude={"stats"})
    payload: object = {
        "dict": data,
        "bare": json.dumps(data),
        "fenced": "My analysis.\n```json\n" + json.dumps(data, indent=1) + "\n```\n",
    }[shape]
    assert parse_result("reflection", payload, STATS) == original


def test_invalid_answers_name_the_problem() -> None:
    with pytest.raises(OutputError, match="no structured output"):
        parse_result("evolution", "", STATS)
    with pytest.raises(OutputError, match=r"action: Input should be"):
        parse_result("evolution", {"action": "jump", "parent_node_id": 1, "rationale": "x"}, STATS)
    with pytest.raises(OutputError, match="not a JSON object"):
        parse_result("evolution", "[1, 2]", STATS)


def test_failed_results_let_the_loop_fall_back(
    tmp_path: Path, evolution_request: Callable[..., Any], reflection_request: Callable[..., Any]
) -> None:
    evo = failed_result("evolution", evolution_request(tmp_path), STATS, "max_turns")
    assert (evo.action, evo.parent_node_id, evo.stats.outcome) == ("continue", 3, "failed:max_turns")  # type: ignore[union-attr]
    refl = failed_result("reflection", reflection_request(tmp_path), STATS, "budget")
    assert refl.lessons == [] and refl.stats.outcome == "failed:budget"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("path", "globs", "expected"),
    [
        ("tools/search.py", ["tools/**"], True),
        ("tools/deep/x.py", ["tools/*.py"], False),
        ("tools/deep/x.py", ["tools/**/*.py"], True),
        ("loop.py", ["**/*.py"], True),
        ("saddler.toml", ["saddler.toml"], True),
        ("data/a.json", ["data/"], True),
        ("eval/sub/grader.py", ["eval"], True),
        ("evaluation.py", ["eval"], False),
        ("./prompts/a.md", ["./prompts/*.md"], True),
        ("prompts/a.md", ["./prompts/*.md"], True),
    ],
)
def test_glob_matching(path: str, globs: list[str], expected: bool) -> None:
    assert matches_any(path, globs) is expected


def test_edit_denial_resolves_paths_and_symlinks(tmp_path: Path, make_worktree: Callable[[Path], Path]) -> None:
    wt = make_worktree(tmp_path / "wt")
    protected = ["eval/**", "saddler.toml"]
    assert edit_denial("tools/search.py", wt, protected) is None
    assert "protected" in (edit_denial(str(wt / "saddler.toml"), wt, protected) or "")
    assert "outside" in (edit_denial(str(wt / ".." / "elsewhere.py"), wt, protected) or "")
    assert "git metadata" in (edit_denial(".git/config", wt, protected) or "")
    (wt / "tools" / "link.py").symlink_to(wt / "eval" / "grader.py")
    assert "protected" in (edit_denial("tools/link.py", wt, protected) or "")


def test_changed_files_sees_edits_and_new_files(tmp_path: Path, make_worktree: Callable[[Path], Path]) -> None:
    wt = make_worktree(tmp_path / "wt")
    assert changed_files(wt) == []
    (wt / "tools" / "search.py").write_text("x = 1\n")
    (wt / "tools" / "new tool.py").write_text("y = 2\n")
    assert changed_files(wt) == ["tools/new tool.py", "tools/search.py"]


def test_retries_back_off_and_give_up() -> None:
    sleeps: list[float] = []
    calls: list[int] = []

    def flaky(attempt: int) -> str:
        calls.append(attempt)
        if attempt < 2:
            raise TransientError("overloaded")
        return "done"

    assert with_retries(flaky, 3, sleep=sleeps.append, rng=random.Random(1)) == "done"
    assert calls == [0, 1, 2] and len(sleeps) == 2 and 2.0 <= sleeps[0] <= 2.5 and 4.0 <= sleeps[1] <= 5.0
    again: list[float] = []
    with_retries(flaky, 3, sleep=again.append, rng=random.Random(1))
    assert again == sleeps  # seeded jitter: same seed, same waits
    with pytest.raises(TransientError):
        with_retries(lambda a: (_ for _ in ()).throw(TransientError("x")), 1, sleep=lambda s: None)


def test_llm_origin_names_the_mutation() -> None:
    stats = SessionStats(backend="t")
    answer = {
        "status": "patched",
        "hypothesis": {"diagnosis": "d", "plan": "Paginate read_file (all rows!)", "patch_kind": "capability"},
    }
    assert parse_result("diagnosis_patch", answer, stats).hypothesis.origin == "llm:paginate-read-file-all-rows"  # type: ignore[union-attr]
    answer["hypothesis"]["origin"] = "web:strassen"  # type: ignore[index]
    assert parse_result("diagnosis_patch", answer, stats).hypothesis.origin == "web:strassen"  # type: ignore[union-attr]
    assert llm_origin("") == "llm:patch"

"""The claude backend driven through a fake SDK Transport speaking the real control protocol."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_transport import FakeTransport, Hook, assistant, result

from saddler.config import SessionConfig
from saddler.errors import AuthenticationError
from saddler.sessions.claude import ClaudeBackend
from saddler.sessions.registry import load_backend
from saddler.sessions.schema import DiagnosisResult, EvolutionResult, ReflectionResult


def backend(tmp_path: Path, scripts: list[list[Any]], **config: Any) -> tuple[ClaudeBackend, list[FakeTransport]]:
    made: list[FakeTransport] = []
    queue = list(scripts)

    def factory() -> FakeTransport:
        made.append(FakeTransport(queue.pop(0)))
        return made[-1]

    cfg = SessionConfig(
        backend="claude",
        model="claude-opus-4-6",
        fallback_model="claude-sonnet-4-5",
        max_turns=12,
        max_budget_usd=1.5,
        retries=2,
        **config,
    )
    sleeps: list[float] = []
    b = ClaudeBackend(
        cfg, benchmark=None, run_dir=tmp_path / "run", seed=3, transport_factory=factory, sleep=sleeps.append
    )
    b.sleeps = sleeps  # type: ignore[attr-defined]
    return b, made


DIAG_ANSWER = {
    "status": "patched",
    "hypothesis": {
        "target_tasks": ["t1"],
        "diagnosis": "search is a stub returning []",
        "plan": "implement search over the index",
        "patch_kind": "capability",
        "subtype": "tool",
        "files": ["tools/search.py"],
        "symptoms": ["empty_results"],
    },
}


def test_diagnosis_builds_options_denies_protected_edit_and_parses_answer(
    tmp_path: Path, diagnosis_request: Callable[..., Any], make_worktree: Callable[[Path], Path]
) -> None:
    wt = make_worktree(tmp_path / "wt")
    req = diagnosis_request(tmp_path / "run", wt)

    def edit_tool() -> None:
        (wt / "tools" / "search.py").write_text("def search(query):\n    return [query]\n")

    def edit_grader() -> None:
        (wt / "eval" / "grader.py").write_text("def grade(answer):\n    return True\n")

    script = [
        assistant("Reading the failing trace."),
        Hook(
            "Edit",
            {"file_path": str(wt / "eval" / "grader.py"), "old_string": "==", "new_string": "!="},
            apply=edit_grader,
        ),
        Hook("Write", {"file_path": "/etc/passwd", "content": "x"}),
        Hook("Bash", {"command": "rm -rf ."}),
        Hook("Bash", {"command": f"evo-dag lessons --db {req.db_path}"}),
        Hook(
            "Edit",
            {"file_path": str(wt / "tools" / "search.py"), "old_string": "[]", "new_string": "[query]"},
            apply=edit_tool,
        ),
        result(structured=DIAG_ANSWER, cost=0.42, turns=7),
    ]
    b, made = backend(tmp_path, [script])
    out = b.diagnose_patch(req)

    assert isinstance(out, DiagnosisResult)
    assert out.status == "patched"
    assert out.hypothesis is not None and out.hypothesis.origin == "llm:implement-search-over-the-index"
    assert out.hypothesis.files == ["tools/search.py"]
    assert out.stats.cost_usd == 0.42
    assert (out.stats.turns, out.stats.tokens_in, out.stats.tokens_out) == (7, 1500, 300)
    assert out.stats.outcome == "ok"
    assert out.stats.backend == "claude" and out.stats.model == "claude-opus-4-6"
    assert out.stats.transcript_path == str(tmp_path / "run" / "sessions" / "3-diagnosis_patch.jsonl")

    decisions = [r["response"].get("hookSpecificOutput", {}).get("permissionDecision") for r in made[0].hook_responses]
    assert decisions == ["deny", "deny", "deny", None, None]
    assert "protected" in made[0].hook_responses[0]["response"]["hookSpecificOutput"]["permissionDecisionReason"]
    assert (wt / "eval" / "grader.py").read_text() == "def grade(answer):\n    return answer == 42\n"
    assert (wt / "tools" / "search.py").read_text() == "def search(query):\n    return [query]\n"

    opts = b.last_options
    assert opts is not None
    assert opts.cwd == str(wt)
    assert opts.setting_sources == []
    assert opts.tools == ["Read", "Glob", "Grep", "Bash", "Edit", "Write"]
    assert opts.allowed_tools == [
        "Read",
        "Glob",
        "Grep",
        "Edit",
        "Write",
        "Bash(evo-dag:*)",
        "Bash(git diff:*)",
        "Bash(git status:*)",
        "Bash(python -m compileall -q .)",  # the check command runs verbatim only
    ]
    assert opts.permission_mode == "dontAsk"
    assert (opts.model, opts.fallback_model, opts.max_turns, opts.max_budget_usd) == (
        "claude-opus-4-6",
        "claude-sonnet-4-5",
        12,
        1.5,
    )
    assert list(opts.hooks or {}) == ["PreToolUse"]
    assert opts.output_format is not None and opts.output_format["type"] == "json_schema"
    assert "stats" not in opts.output_format["schema"]["properties"]
    assert isinstance(opts.system_prompt, str) and "diagnosis_patch" in opts.system_prompt
    assert made[0].initialize is not None and len(made[0].initialize["hooks"]["PreToolUse"]) == 1

    prompt = next(m for m in made[0].written if m["type"] == "user")["message"]["content"]
    assert "expected 3 results, agent returned none" in prompt
    assert "    evo-dag lessons " in prompt and f"`--db {req.db_path}`" in prompt
    assert opts.env["EVODAG_DB"] == req.db_path
    lines = [json.loads(x) for x in Path(out.stats.transcript_path).read_text().splitlines()]
    assert [x["kind"] for x in lines][:2] == ["prompt", "attempt"]
    assert lines[-1] == {"kind": "outcome", "outcome": "ok", "cost_usd": 0.42, "duration_s": out.stats.duration_s}


def test_exploration_adds_web_search_tools(
    tmp_path: Path, diagnosis_request: Callable[..., Any], make_worktree: Callable[[Path], Path]
) -> None:
    wt = make_worktree(tmp_path / "wt")
    req = diagnosis_request(tmp_path / "run", wt, exploration=True)
    b, _ = backend(tmp_path, [])
    assert b.build_options("diagnosis_patch", req).tools == [
        "Read",
        "Glob",
        "Grep",
        "Bash",
        "Edit",
        "Write",
        "WebSearch",
        "WebFetch",
    ]
    b.config.allow_web_search_on_plateau = False
    assert "WebSearch" not in (b.build_options("diagnosis_patch", req).tools or [])


def test_reflection_reads_only_and_parses_lessons_from_text_fallback(
    tmp_path: Path, reflection_request: Callable[..., Any]
) -> None:
    answer = {
        "lessons": [
            {
                "task_id": "t1",
                "category": "fixed",
                "attribution": "true_fix",
                "text": "search now returns results; the trace diverges at the search call",
            }
        ],
        "summary": "one true fix",
    }
    script = [
        Hook("Write", {"file_path": str(tmp_path / "run" / "notes.md"), "content": "x"}),
        result(text="Here is my answer:\n```json\n" + json.dumps(answer) + "\n```", cost=0.1, turns=2),
    ]
    b, made = backend(tmp_path, [script])
    out = b.reflect(reflection_request(tmp_path / "run"))
    assert isinstance(out, ReflectionResult)
    assert [(x.task_id, x.category, x.attribution) for x in out.lessons] == [("t1", "fixed", "true_fix")]
    assert out.stats.cost_usd == 0.1 and out.stats.outcome == "ok"
    assert made[0].hook_responses[0]["response"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    opts = b.last_options
    assert opts is not None and opts.cwd == str(tmp_path / "run")
    assert opts.tools == ["Read", "Glob", "Grep", "Bash"]
    assert "Edit" in opts.disallowed_tools


def test_evolution_structured_answer(tmp_path: Path, evolution_request: Callable[..., Any]) -> None:
    answer = {"action": "revert", "parent_node_id": 3, "edge_ids": [2], "rationale": "edge 2 is a true regression"}
    b, _ = backend(tmp_path, [[result(structured=answer, cost=0.05, models=("claude-sonnet-4-5", "claude-opus-4-6"))]])
    out = b.evolve(evolution_request(tmp_path / "run"))
    assert out.stats.model == "claude-opus-4-6,claude-sonnet-4-5"
    assert isinstance(out, EvolutionResult)
    assert (out.action, out.parent_node_id, out.edge_ids) == ("revert", 3, [2])
    assert out.stats.transcript_path == str(tmp_path / "run" / "sessions" / "3-evolution.jsonl")


def test_max_turns_is_a_failed_session_and_evolution_falls_back_to_continue(
    tmp_path: Path, evolution_request: Callable[..., Any]
) -> None:
    failed = result("error_max_turns", is_error=True, cost=0.9, turns=12)
    b, _ = backend(tmp_path, [[failed]])
    out = b.evolve(evolution_request(tmp_path / "run"))
    assert (out.action, out.parent_node_id, out.edge_ids) == ("continue", 3, [])
    assert out.stats.outcome == "failed:max_turns"
    assert out.stats.cost_usd == 0.9 and out.stats.turns == 12


def test_budget_exceeded_diagnosis_is_failed(
    tmp_path: Path, diagnosis_request: Callable[..., Any], make_worktree: Callable[[Path], Path]
) -> None:
    wt = make_worktree(tmp_path / "wt")
    b, _ = backend(tmp_path, [[result("error_max_budget_usd", is_error=True, cost=1.6)]])
    out = b.diagnose_patch(diagnosis_request(tmp_path / "run", wt))
    assert out.status == "failed" and out.stats.outcome == "failed:budget" and out.stats.cost_usd == 1.6


def test_unparsable_answer_is_failed(tmp_path: Path, reflection_request: Callable[..., Any]) -> None:
    b, _ = backend(tmp_path, [[result(text="I could not decide.")]])
    out = b.reflect(reflection_request(tmp_path / "run"))
    assert out.lessons == [] and out.stats.outcome == "failed:unparsable_output"
    assert "not a JSON object" in out.stats.error


def test_authentication_failure_raises_naming_the_variable(
    tmp_path: Path, reflection_request: Callable[..., Any]
) -> None:
    script = [
        assistant("Invalid API key · Please run /login", error="authentication_failed"),
        result(text="Invalid API key · Please run /login", is_error=True, cost=0.0, turns=1),
    ]
    b, made = backend(tmp_path, [script])
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        b.reflect(reflection_request(tmp_path / "run"))
    assert len(made) == 1  # no retry on bad credentials


def test_transient_error_is_retried_with_backoff(tmp_path: Path, reflection_request: Callable[..., Any]) -> None:
    overloaded = result(text="API Error: overloaded", is_error=True, status=529, cost=0.01, turns=1)
    answer = {"lessons": [], "summary": "nothing learned"}
    b, made = backend(tmp_path, [[overloaded], [overloaded], [result(structured=answer, cost=0.2)]])
    out = b.reflect(reflection_request(tmp_path / "run"))
    assert len(made) == 3
    assert out.stats.outcome == "ok" and out.stats.cost_usd == 0.22
    assert len(b.sleeps) == 2 and 2.0 <= b.sleeps[0] <= 2.5 and 4.0 <= b.sleeps[1] <= 5.0  # type: ignore[attr-defined]


def test_transient_errors_exhaust_retries_into_failed_result(
    tmp_path: Path, evolution_request: Callable[..., Any]
) -> None:
    overloaded = result(text="API Error: overloaded", is_error=True, status=529, cost=0.0, turns=1)
    b, made = backend(tmp_path, [[overloaded]] * 3)
    out = b.evolve(evolution_request(tmp_path / "run"))
    assert len(made) == 3 and out.action == "continue" and out.stats.outcome == "failed:transient"


def test_registry_builds_the_claude_backend(tmp_path: Path) -> None:
    b = load_backend(SessionConfig(backend="claude"), benchmark=None, run_dir=tmp_path, seed=0)  # type: ignore[arg-type]
    assert isinstance(b, ClaudeBackend) and b.transport_factory is None


@pytest.mark.slow
def test_real_bundled_cli_without_credentials_raises_authentication_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reflection_request: Callable[..., Any]
) -> None:
    """No fake here: the SDK's own subprocess transport and the bundled CLI, refused before any API call."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    b = ClaudeBackend(SessionConfig(backend="claude", retries=0, timeout_s=120), run_dir=tmp_path / "run", seed=0)
    with pytest.raises(AuthenticationError, match="set ANTHROPIC_API_KEY"):
        b.reflect(reflection_request(tmp_path / "run"))
    lines = [json.loads(x) for x in (tmp_path / "run" / "sessions" / "3-reflection.jsonl").read_text().splitlines()]
    init = next(x for x in lines if x.get("type") == "SystemMessage")["data"]["data"]
    assert sorted(init["tools"]) == ["Bash", "Glob", "Grep", "Read", "StructuredOutput"]
    assert (init["cwd"], init["permissionMode"], init["model"]) == (str(tmp_path / "run"), "dontAsk", "claude-opus-4-6")


def test_options_follow_the_roles_limits_and_effort(
    tmp_path: Path,
    diagnosis_request: Callable[..., Any],
    evolution_request: Callable[..., Any],
    make_worktree: Callable[[Path], Path],
) -> None:
    from saddler.errors import ConfigError

    wt = make_worktree(tmp_path / "wt")
    roles = {"diagnosis_patch": {"max_turns": 150, "effort": "xhigh"}, "evolution": {"model": "claude-haiku-4-5"}}
    b, _ = backend(tmp_path, [], roles=roles, effort="medium")
    diag = b.build_options("diagnosis_patch", diagnosis_request(tmp_path / "run", wt))
    evo = b.build_options("evolution", evolution_request(tmp_path / "run"))
    assert (diag.max_turns, diag.effort, diag.max_budget_usd) == (150, "xhigh", 1.5)
    assert (evo.model, evo.max_turns, evo.effort) == ("claude-haiku-4-5", 12, "medium")
    with pytest.raises(ConfigError, match=r"'minimal' .* Claude accepts: low, medium, high, xhigh, max"):
        backend(tmp_path, [], effort="minimal")

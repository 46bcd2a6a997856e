"""Issue 21.9: the presets against stand-ins that print what the real CLIs printed (tests/fake_clis, built from
tests/fixtures/real_clis): claude's structured output through StructuredOutput, its nudge-then-prose and its
give-up after invalid answers; codex's warning item, reconnect and usage limit; pi's missing key on stderr and its
API errors behind exit 0."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from saddler.errors import AuthenticationError, BackendError
from saddler.sessions import confine
from saddler.sessions.llm_backend import UsageLimitError

BWRAP_OK, BWRAP_WHY = confine.bwrap_works()


@pytest.fixture
def mode(fakes: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """`mode("prose")`: how the stand-ins' model and API behave (`FAKE_CLI_MODE`, see tests/fake_clis)."""
    return lambda value: monkeypatch.setenv("FAKE_CLI_MODE", value)


def _reflect(command_backend: Callable[..., Any], reflection_request: Callable[..., Any], run_dir: Path, preset: str):
    if preset == "pi" and not BWRAP_OK:
        pytest.skip(f"pi runs confined and bubblewrap cannot run here: {BWRAP_WHY}")
    return command_backend(run_dir, preset).reflect(reflection_request(run_dir))


def test_claude_answers_through_structured_output(
    outside: Path, fakes: Path, command_backend, reflection_request, records
) -> None:
    result = _reflect(command_backend, reflection_request, outside / "run", "claude")
    assert result.stats.outcome == "ok" and [x.task_id for x in result.lessons] == ["t1", "t2"]
    transcript = [json.loads(line) for line in Path(result.stats.transcript_path).read_text().splitlines()]
    [final] = [json.loads(t["line"]) for t in transcript if t.get("kind") == "stdout"]
    assert final["structured_output"]["lessons"] and final["terminal_reason"] == "completed"  # the recorded shape


def test_claude_prose_instead_of_structured_output_is_an_unreadable_answer(
    outside: Path, mode, command_backend, reflection_request
) -> None:
    """The real CLI nudges a model that skips StructuredOutput once, then returns its prose as a success (exit 0)."""
    mode("prose")
    result = _reflect(command_backend, reflection_request, outside / "run", "claude")
    assert result.stats.outcome == "failed:unparsable_output"


def test_claude_giving_up_on_invalid_structured_output_keeps_the_cli_s_reason(
    outside: Path, mode, command_backend, reflection_request
) -> None:
    """After 5 rejected StructuredOutput calls the CLI exits 1 with `error_max_structured_output_retries` and the
    schema error in `errors`: the session's error is that reason, not the tail of the JSON line."""
    mode("invalid")
    result = _reflect(command_backend, reflection_request, outside / "run", "claude")
    assert result.stats.outcome == "failed:unparsable_output"
    assert result.stats.error.startswith("Failed to provide valid structured output after 5 attempts")
    assert "must have required property" in result.stats.error


def test_claude_at_its_turn_limit(outside: Path, mode, command_backend, reflection_request) -> None:
    mode("max_turns")
    result = _reflect(command_backend, reflection_request, outside / "run", "claude")
    assert result.stats.outcome == "failed:max_turns" and result.stats.turns == 41


@pytest.mark.parametrize("preset", ["claude", "codex", "pi"])
def test_a_missing_key_stops_the_run(
    preset: str, outside: Path, fakes: Path, monkeypatch: pytest.MonkeyPatch, command_backend, reflection_request
) -> None:
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "CODEX_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    variable = {"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY", "pi": "ANTHROPIC_API_KEY"}[preset]
    with pytest.raises(AuthenticationError, match=variable):
        _reflect(command_backend, reflection_request, outside / "run", preset)


@pytest.mark.parametrize("preset", ["claude", "codex", "pi"])
def test_a_rate_limit_is_transient_whatever_the_exit_code(
    preset: str, outside: Path, mode, command_backend, reflection_request
) -> None:
    mode("fail:429")  # pi exits 0 here; claude and codex exit 1
    result = _reflect(command_backend, reflection_request, outside / "run", preset)
    assert result.stats.outcome == "failed:transient"
    assert "rate limit" in result.stats.error.lower() or "429" in result.stats.error


def test_codex_reconnecting_mid_stream_still_answers(outside: Path, mode, command_backend, reflection_request) -> None:
    mode("disconnect")
    result = _reflect(command_backend, reflection_request, outside / "run", "codex")
    assert result.stats.outcome == "ok" and result.stats.turns == 2  # the model answered twice


def test_codex_usage_limit_names_its_reset(outside: Path, mode, command_backend, reflection_request) -> None:
    mode("fail:usage_limit")
    with pytest.raises(UsageLimitError) as caught:
        _reflect(command_backend, reflection_request, outside / "run", "codex")
    assert caught.value.resets_at is not None


def test_codex_with_its_home_under_tmp_stops_the_run(
    outside: Path, fakes: Path, monkeypatch: pytest.MonkeyPatch, command_backend, reflection_request
) -> None:
    home = Path(tempfile.mkdtemp(prefix="codex-home-", dir="/tmp"))
    monkeypatch.setenv("CODEX_HOME", str(home))
    try:
        with pytest.raises(BackendError, match="set CODEX_HOME to a folder outside /tmp"):
            _reflect(command_backend, reflection_request, outside / "run", "codex")
    finally:
        shutil.rmtree(home, ignore_errors=True)

"""What the real claude, codex and pi CLIs print when their model fails (recorded in tests/fixtures/real_clis by
tests/record_real_clis.py against the loopback model) is read as the failure it is, with the error's own text."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from repo_paths import FIXTURES

from saddler.sessions.failures import read_failure, usage_reset

RECORDED = FIXTURES / "real_clis"


def recorded(name: str) -> dict:
    return json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))


def failure_of(name: str):
    data = recorded(name)
    now = dt.datetime.fromtimestamp(data["recorded_at"], dt.UTC)
    return read_failure(data["stdout"], data["stderr"], data["returncode"], now), data


@pytest.mark.parametrize(
    "name", ["claude-ok", "codex-ok", "pi-ok", "codex-500_reconnected", "codex-disconnected", "pi-429_retried"]
)
def test_an_answer_is_no_failure(name: str) -> None:
    assert failure_of(name)[0] is None


@pytest.mark.parametrize(
    ("name", "kind", "status", "text"),
    [
        ("claude-400", "error", 400, "Prompt is too long"),
        ("claude-401", "auth", 401, "Invalid API key"),
        ("claude-429", "transient", 429, "per-minute rate limit"),
        ("claude-500", "transient", 500, "API Error: 500 Internal server error"),
        ("claude-529", "transient", 529, "API Error: 529 Overloaded"),
        ("codex-400", "error", None, "Invalid schema for response_format"),
        ("codex-401", "auth", 401, "Incorrect API key provided"),
        ("codex-429", "transient", 429, "exceeded retry limit"),
        ("codex-500", "transient", None, "high demand"),
        ("codex-503", "transient", None, "at capacity"),
        ("pi-400", "error", 400, "prompt is too long"),
        ("pi-401", "auth", 401, "invalid x-api-key"),
        ("pi-429", "transient", 429, "per-minute rate limit"),
        ("pi-500", "transient", 500, "Internal server error"),
        ("pi-529", "transient", 529, "Overloaded"),
        ("claude-no_key", "auth", None, "Not logged in"),
        ("codex-no_key", "auth", None, "Missing environment variable: `OPENAI_API_KEY`"),
        ("pi-no_key", "auth", None, "No API key found for anthropic"),
        ("codex-sandbox_tmp", "sandbox", None, "Refusing to create helper binaries under temporary dir"),
    ],
)
def test_api_errors_are_read_with_their_own_text(name: str, kind: str, status: int | None, text: str) -> None:
    failure, data = failure_of(name)
    assert failure is not None, data["stdout"][-500:]
    assert (failure.kind, failure.status) == (kind, status)
    assert text in failure.message
    assert len(failure.message) < 400  # the error itself, not the tail of a JSON line


def test_codex_exits_0_with_an_answer_when_its_sandbox_could_not_start() -> None:
    """CODEX_HOME under /tmp: codex answers, exit 0, while every command its model ran failed in the session."""
    data = recorded("codex-sandbox_tmp")
    assert data["returncode"] == 0 and '"agent_message"' in data["stdout"]
    assert "bwrap: execvp codex-linux-sandbox" in data["tool_outputs"][0]


def test_pi_exits_0_on_api_errors_yet_they_are_failures() -> None:
    for name in ("pi-400", "pi-401", "pi-429", "pi-500", "pi-529"):
        assert recorded(name)["returncode"] == 0
        assert failure_of(name)[0] is not None


@pytest.mark.parametrize("name", ["claude-usage_limit", "codex-usage_limit"])
def test_usage_limits_are_read_with_their_reset_time(name: str) -> None:
    failure, data = failure_of(name)
    assert failure is not None and failure.kind == "usage_limit"
    # the CLIs print the reset to the minute
    assert failure.resets_at is not None
    assert 0 <= data["resets_at"] - failure.resets_at < 60


def test_reset_times_in_other_forms() -> None:
    now = dt.datetime(2026, 3, 1, 23, 50, tzinfo=dt.UTC)
    at = dt.datetime.fromtimestamp
    assert at(usage_reset("You've hit your limit · resets 4am (UTC)", now), dt.UTC) == dt.datetime(
        2026, 3, 2, 4, 0, tzinfo=dt.UTC
    )
    berlin = usage_reset("You've hit your weekly limit · resets Mar 5, 11pm (Europe/Berlin)", now)
    assert at(berlin, dt.UTC) == dt.datetime(2026, 3, 5, 22, 0, tzinfo=dt.UTC)
    codex = usage_reset("You’ve hit your usage limit. ... try again at Mar 3rd, 2026 1:05 PM.", now)
    assert at(codex, dt.UTC) == dt.datetime(2026, 3, 3, 13, 5, tzinfo=dt.UTC)
    assert usage_reset("Claude AI usage limit reached|1772500000", now) == 1772500000
    assert usage_reset("You've hit your limit", now) is None


def test_a_missing_key_on_stderr_is_an_auth_failure() -> None:
    stderr = "No API key found for anthropic.\n\nUse /login to log into a provider via OAuth or API key."
    stdout = '{"type":"session","version":3,"id":"x","cwd":"/w"}\n'
    failure = read_failure(stdout, stderr, 1, dt.datetime.now(dt.UTC))
    assert failure is not None and failure.kind == "auth"

"""Issue 21.3-4: the command backend reads the real CLIs' failures (replayed from tests/fixtures/real_clis): pi's
API errors behind exit 0 are failures, not answers; a bad key stops the run; 429 / 5xx / overloaded are retried
with backoff; the stored error is the error itself."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from repo_paths import TESTS

from saddler.errors import AuthenticationError, BackendError
from saddler.sessions.command import CommandBackend

REPLAY = TESTS / "fake_clis" / "replay.py"


@pytest.fixture
def replaying(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """`replaying(recording)`: claude, codex and pi on PATH print that recording; returns the run-count file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("claude", "codex", "pi"):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {sys.executable} {REPLAY} "$@"\n')
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    count = tmp_path / "runs.txt"
    monkeypatch.setenv("FAKE_CLI_REPLAY_COUNT", str(count))

    def use(name: str) -> Path:
        monkeypatch.setenv("FAKE_CLI_REPLAY", name)
        return count

    return use


def _backend(
    make: Callable[..., CommandBackend], run_dir: Path, preset: str, retries: int = 0
) -> tuple[CommandBackend, list[float]]:
    slept: list[float] = []
    backend = make(run_dir, preset, sandbox="none")
    backend.config = backend.config.model_copy(update={"retries": retries})
    backend.sleep = slept.append
    return backend, slept


@pytest.mark.parametrize("recording", ["pi-400", "codex-400", "claude-400"])
def test_an_api_error_is_a_failed_session_with_the_error_itself(
    recording: str, replaying, command_backend, reflection_request, tmp_path: Path
) -> None:
    replaying(recording)
    backend, _ = _backend(command_backend, tmp_path, recording.split("-")[0])
    result = backend.reflect(reflection_request(tmp_path))
    assert result.stats.outcome == "failed:error"
    assert "too long" in result.stats.error.lower() or "invalid schema" in result.stats.error.lower()
    assert not result.stats.error.lstrip().startswith(("{", '"'))  # the message, not a cut JSON line


@pytest.mark.parametrize("recording", ["pi-401", "codex-401", "claude-401"])
def test_a_rejected_key_stops_the_run(recording: str, replaying, command_backend, reflection_request, tmp_path: Path):
    replaying(recording)
    backend, _ = _backend(command_backend, tmp_path, recording.split("-")[0])
    with pytest.raises(AuthenticationError):
        backend.reflect(reflection_request(tmp_path))


@pytest.mark.parametrize("recording", ["pi-429", "pi-500", "claude-500", "claude-529", "codex-500", "codex-503"])
def test_transient_errors_are_retried_with_backoff_and_bounded(
    recording: str, replaying, command_backend, reflection_request, tmp_path: Path
) -> None:
    runs = replaying(recording)
    backend, slept = _backend(command_backend, tmp_path, recording.split("-")[0], retries=2)
    result = backend.reflect(reflection_request(tmp_path))
    assert result.stats.outcome == "failed:transient"
    assert len(runs.read_text().splitlines()) == 3  # the first run and two retries, no more
    assert result.stats.cli_attempts == 3  # shown in the sessions table
    assert len(slept) == 2 and slept[1] > slept[0]


@pytest.mark.parametrize("recording", ["pi-no_key", "codex-no_key", "claude-no_key"])
def test_a_missing_key_stops_the_run_naming_the_variable(
    recording: str, replaying, command_backend, reflection_request, tmp_path: Path
) -> None:
    replaying(recording)
    backend, _ = _backend(command_backend, tmp_path, recording.split("-")[0])
    with pytest.raises(AuthenticationError, match=backend.key_variable):
        backend.reflect(reflection_request(tmp_path))


def test_codex_whose_sandbox_cannot_start_stops_the_run(
    replaying, command_backend, reflection_request, tmp_path: Path
) -> None:
    """Issue 21.2/6: CODEX_HOME under /tmp, codex answers with exit 0 while every command failed: a system fault
    saying what to do, not a session recorded as answered (or as no_patch)."""
    replaying("codex-sandbox_tmp")
    backend, _ = _backend(command_backend, tmp_path, "codex")
    with pytest.raises(BackendError, match=r"CODEX_HOME to a folder outside /tmp.*saddler doctor"):
        backend.reflect(reflection_request(tmp_path))

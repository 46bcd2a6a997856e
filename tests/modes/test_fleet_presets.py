"""Issue 21.8: fleet mode runs each CLI through the session presets (`Preset.fleet`), so it passes the prompt by
file, reads the CLI's output with the same parsers and its failures with the same reader as the optimizer's
sessions. Against the stand-ins built from the real CLIs' recordings (tests/fake_clis)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evodag.store import EvoDAG
from saddler.errors import AuthenticationError
from saddler.modes.fleet.loop import FleetRun, init_fleet
from saddler.modes.fleet.results import read_results


@pytest.fixture
def fleet_on_fakes(outside: Path, fakes: Path, fleet_setup: Callable[..., Path]) -> Callable[..., tuple[Path, Path]]:
    """`fleet_on_fakes(provider, program_md="", **changes)`: a fleet (one iteration) whose agent is the claude,
    codex or pi stand-in, `program_md` appended to the project's program.md; returns (fleet root, workdir)."""

    def make(provider: str, program_md: str = "", **changes: Any) -> tuple[Path, Path]:
        base = outside / "fleet"
        base.mkdir()
        fleet_json = fleet_setup(base, **{"config.provider": provider, "stop_when.max_iterations": 1, **changes})
        (base / "bin" / "claude").unlink()  # the fleet tests' own scripted agent: use the stand-ins here
        program = base / "my-project" / "program.md"
        program.write_text(program.read_text() + program_md)
        return init_fleet(base / "root", fleet_json).root, base / "my-project"

    return make


@pytest.mark.parametrize("provider", ["claude", "codex", "pi"])
def test_a_300_kb_program_md_reaches_every_provider_intact(
    provider: str, fleet_on_fakes, fakes: Path, records: Callable[[Path], list[dict[str, Any]]]
) -> None:
    """One argv element may not pass 128 KiB on Linux (E2BIG); the prompt goes by file (stdin or `@file`)."""
    root, work = fleet_on_fakes(provider, "".join(f"Note {i:06d}: read all of this.\n" for i in range(11_000)))
    assert (work / "program.md").stat().st_size > 300_000
    FleetRun(root).run()
    prompt = (root / "logs" / "prompt-iter-1.md").read_text(encoding="utf-8")
    assert len(prompt) > 300_000 and prompt.rstrip().endswith("</results.tsv>")
    [run] = records(fakes)
    assert hashlib.sha256(prompt.encode("utf-8")).hexdigest() in run["part_sha256"]
    assert all(len(a) < 100_000 for a in run["argv"])
    rows = read_results(work / "results.tsv")
    assert rows[-1].description == "no change: read program.md"  # the DESCRIPTION of the CLI's final message
    with EvoDAG(root / "evodag.sqlite", readonly=True) as store:
        [session] = store.sessions()
    assert (session.outcome, session.error) == ("exit_0", "")
    assert session.turns >= 1


def test_pi_api_errors_behind_exit_0_are_failed_sessions_retried_with_the_fallback_model(
    fleet_on_fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pi exits 0 when every model call failed (`stopReason: error`): a failed session, so the fallback model is
    tried, and its error is recorded; not an experiment that ran and changed nothing."""
    root, _ = fleet_on_fakes("pi")
    monkeypatch.setenv("FAKE_CLI_MODE", "fail:429")
    said: list[str] = []
    FleetRun(root, say=said.append).run()
    with EvoDAG(root / "evodag.sqlite", readonly=True) as store:
        sessions = [(s.model, s.outcome) for s in store.sessions()]
        errors = {s.error for s in store.sessions()}
    assert sessions == [("sonnet", "failed:transient"), ("haiku", "failed:transient")]
    assert errors == {"Number of request tokens has exceeded your per-minute rate limit"}
    assert any("retrying with fallback_model haiku" in line for line in said)


@pytest.mark.parametrize("provider", ["claude", "codex", "pi"])
def test_a_missing_key_stops_the_fleet(provider: str, fleet_on_fakes, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = fleet_on_fakes(provider)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "CODEX_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(AuthenticationError, match=r"ANTHROPIC_API_KEY|OPENAI_API_KEY"):
        FleetRun(root).run()

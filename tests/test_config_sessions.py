"""`[run.sessions]`: per-role limits (`roles.<role>`), their defaults and precedence, and the effort setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from saddler.config import ROLE_DEFAULTS, SessionConfig, load_run_config
from saddler.errors import ConfigError


def write(tmp_path: Path, sessions: str) -> Path:
    (tmp_path / "saddler.toml").write_text(f'[run]\nname = "r"\n[run.sessions]\n{sessions}\n')
    return tmp_path


def test_roles_default_to_their_own_limits() -> None:
    cfg = SessionConfig()
    diag, refl, evo = (cfg.for_role(r) for r in ("diagnosis_patch", "reflection", "evolution"))
    assert (diag.timeout_s, diag.max_turns, diag.max_budget_usd) == (7200.0, 100, 5.0)
    assert (refl.timeout_s, evo.timeout_s) == (1800.0, 900.0)
    assert diag.effort is None and diag.model == cfg.model
    assert set(ROLE_DEFAULTS) == {"diagnosis_patch", "reflection", "evolution"}


def test_a_value_set_at_the_top_applies_to_every_role_and_a_role_table_wins(tmp_path: Path) -> None:
    run = write(
        tmp_path,
        'max_budget_usd = 0.25\neffort = "low"\n'
        '[run.sessions.roles.diagnosis_patch]\ntimeout_s = 14400\nmax_budget_usd = 20\neffort = "high"\n'
        '[run.sessions.roles.evolution]\nmodel = "claude-haiku-4-5"\n',
    )
    cfg = load_run_config(run).sessions
    diag, refl, evo = (cfg.for_role(r) for r in ("diagnosis_patch", "reflection", "evolution"))
    assert (diag.timeout_s, diag.max_budget_usd, diag.effort, diag.max_turns) == (14400.0, 20.0, "high", 100)
    assert (refl.max_budget_usd, refl.effort, refl.timeout_s) == (0.25, "low", 1800.0)
    assert (evo.model, evo.max_budget_usd, refl.model) == ("claude-haiku-4-5", 0.25, "claude-opus-4-6")


@pytest.mark.parametrize(
    ("sessions", "message"),
    [
        ("[run.sessions.roles.diagnosis_patch]\ntimeout_s = 0", "run.sessions.roles.diagnosis_patch.timeout_s"),
        ('effort = "extreme"', "run.sessions.effort"),
        ("[run.sessions.roles.planning]\nmax_turns = 3", "run.sessions.roles.planning"),
        ('sandbox = "docker"', "run.sessions.sandbox"),
    ],
)
def test_bad_session_settings_are_named_by_their_dotted_path(tmp_path: Path, sessions: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_run_config(write(tmp_path, sessions))

"""The real-CLI tier's fixtures: `clis`, the real claude, codex and pi installed from npm (tests/real_clis.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import real_clis

from saddler.cli.app import app


@pytest.fixture(scope="module")
def clis() -> dict[str, Path]:
    """The three CLIs by name, installed once per module when any is missing."""
    return real_clis.install()


@pytest.fixture
def run_preset(outside: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """`run_preset(preset, model_url, seed, **sets)`: init and run a short opsdesk run (command backend) whose
    sessions are the real `preset` CLI pointed at the loopback model at `model_url`, HOME under `outside`; `sets`
    are more `--set` values (dotted keys written with `__`, TOML values). Asserts both commands exit 0; returns the
    run folder."""

    def run(preset: str, model_url: str, seed: int, **sets: str) -> Path:
        env = real_clis.environment(outside / "home", model_url, retries=0, base=dict(os.environ))
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        run_dir = outside / "run"
        values = {"loop.batch_size": "3", "loop.test_runs": "1", "executor.workers": "1", "sessions.retries": "0",
                  **{key.replace("__", "."): value for key, value in sets.items()}}  # fmt: skip
        args = real_clis.init_args(run_dir, preset, seed, values)
        runner = CliRunner()
        assert runner.invoke(app, args).exit_code == 0
        result = runner.invoke(app, ["run", str(run_dir), "--json"])
        assert result.exit_code == 0, result.output
        return run_dir

    return run

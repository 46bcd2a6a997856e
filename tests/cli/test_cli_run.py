"""`saddler init | status | pause | resume | stop | eval | export | report` at their edges (CliRunner)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from saddler.cli.app import app

runner = CliRunner()


def _init(path: Path, *extra: str) -> None:
    result = runner.invoke(app, ["init", str(path), "--template", "opsdesk", *extra])
    assert result.exit_code == 0, result.output
    assert result.output == f"created {path / 'saddler.toml'}\n"


def test_init_writes_a_valid_config_with_overrides(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _init(
        run,
        "--seed",
        "7",
        "--set",
        "loop.max_iterations=3",
        "--set",
        "policies.dev_eval=never",
        "--set",
        'executor.env_allow=["PATH"]',
    )
    cfg = tomllib.loads((run / "saddler.toml").read_text())["run"]
    assert cfg["seed"] == 7 and cfg["benchmark"] == "opsdesk" and cfg["loop"]["max_iterations"] == 3
    assert cfg["policies"] == {"capability_epochs": 2.0, "dev_eval": "never"}
    assert cfg["executor"]["env_allow"] == ["PATH"]
    assert (run / "harness" / ".git").is_dir() and (run / "harness" / "loop.py").is_file()
    assert runner.invoke(app, ["validate", str(run)]).exit_code == 0


def test_init_refuses_a_non_empty_folder_without_force(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _init(run)
    again = runner.invoke(app, ["init", str(run), "--template", "opsdesk"])
    assert again.exit_code == 2  # the user chooses another folder
    assert again.output == f"error: {run} is not empty; pass --force to replace it\n"
    _init(run, "--force")


def test_init_errors_are_clean(tmp_path: Path) -> None:
    both = runner.invoke(app, ["init", str(tmp_path / "a")])
    assert both.exit_code == 2 and both.output == "error: give exactly one of --template NAME or --harness PATH\n"
    unknown = runner.invoke(app, ["init", str(tmp_path / "b"), "--template", "nope"])
    assert unknown.exit_code == 2 and unknown.output.startswith("error: unknown template 'nope'; available: ")
    bad_set = runner.invoke(app, ["init", str(tmp_path / "c"), "--template", "opsdesk", "--set", "loop.batch_size=0"])
    assert bad_set.exit_code == 2
    assert "run.loop.batch_size: Input should be greater than or equal to 1" in bad_set.output
    no_eq = runner.invoke(app, ["init", str(tmp_path / "d"), "--template", "opsdesk", "--set", "loop"])
    assert no_eq.exit_code == 2 and "expected KEY=VALUE" in no_eq.output


def test_commands_on_something_that_is_not_a_run(tmp_path: Path) -> None:
    for cmd in (["run"], ["status"], ["pause"], ["report"], ["export", "--to", str(tmp_path / "x")]):
        result = runner.invoke(app, [*cmd[:1], str(tmp_path), *cmd[1:]])
        assert result.exit_code == 2, cmd
        assert result.output == (
            f"error: {tmp_path} is not a run folder (no saddler.toml); create one with `saddler init`\n"
        )


def test_status_before_the_first_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _init(run)
    result = runner.invoke(app, ["status", str(run)])
    assert result.exit_code == 2
    assert result.output == f"error: {run} has not run yet (no evodag.sqlite); start it with `saddler run {run}`\n"


def test_pause_resume_stop_sentinels(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _init(run)
    assert runner.invoke(app, ["pause", str(run)]).exit_code == 0 and (run / "PAUSE").is_file()
    assert runner.invoke(app, ["stop", str(run)]).exit_code == 0 and (run / "STOP").is_file()
    resumed = runner.invoke(app, ["resume", str(run)])
    assert resumed.exit_code == 0 and not (run / "PAUSE").exists() and not (run / "STOP").exists()
    assert f"run `saddler run {run}` to continue" in resumed.output


def test_eval_and_export_unknown_node(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _init(run, "--set", "loop.max_iterations=0", "--set", "loop.test_runs=1", "--set", "policies.dev_eval=never")
    done = runner.invoke(app, ["run", str(run), "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert summary["termination"] == "max_iterations" and summary["best_node"] == 1
    for cmd in (
        ["eval", str(run), "--node", "99", "--split", "dev"],
        ["export", str(run), "--node", "99", "--to", str(tmp_path / "out")],
    ):
        result = runner.invoke(app, cmd)
        assert result.exit_code == 2
        assert result.output.startswith("error: unknown node 99; `evo-dag summary` lists nodes")
    bad_split = runner.invoke(app, ["eval", str(run), "--node", "1", "--split", "train"])
    assert bad_split.exit_code == 2 and bad_split.output == "error: --split 'train': expected dev or test\n"
    exported = runner.invoke(app, ["export", str(run), "--to", str(tmp_path / "out"), "--json"])
    assert exported.exit_code == 0 and json.loads(exported.output)["node_id"] == 1
    assert (tmp_path / "out" / "harness" / "loop.py").is_file()


def test_run_warns_before_it_starts_when_rollouts_are_not_contained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from saddler.executor import landlock, sandbox

    run = tmp_path / "run"
    _init(run, "--set", "loop.max_iterations=0", "--set", "loop.test_runs=1", "--set", "policies.dev_eval=never")
    monkeypatch.setattr(sandbox, "bwrap_status", lambda: (False, "bubblewrap is not installed"))
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    done = runner.invoke(app, ["run", str(run)])
    assert done.exit_code == 0, done.output
    first = done.output.splitlines()[0]
    assert first.startswith("warning: rollouts are not fully isolated: sandbox auto -> none (bubblewrap is not")
    assert "/proc/<pid>/environ" in done.output and "apt-get install bubblewrap" in done.output
    bwrap = tmp_path / "asked"
    _init(bwrap, "--set", 'executor.sandbox="bwrap"')
    refused = runner.invoke(app, ["run", str(bwrap)])
    assert refused.exit_code == 1
    assert refused.output.startswith("error: sandbox 'bwrap' requested but bubblewrap is not installed")
    assert not (bwrap / "evodag.sqlite").exists()  # refused before anything was made


def test_the_claude_agent_template_lets_rollouts_reach_the_api(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = runner.invoke(app, ["init", str(run), "--template", "claude_agent"])
    assert result.exit_code == 0, result.output
    executor = tomllib.loads((run / "saddler.toml").read_text())["run"]["executor"]
    assert executor["network"] is True and "ANTHROPIC_API_KEY" in executor["env_allow"]

"""Issue 21.1: an agent session must not reach saddler's own processes through the run folder. Whatever the backend
lets an agent write, saddler's git runs no hook or planted config, and a session that changed anything outside its
worktree (the clone's .git, evodag.sqlite, sessions/) is discarded and recorded."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from gitrepo import init_commit
from repo_paths import FAKE_AGENT
from typer.testing import CliRunner

from saddler.cli.app import app
from saddler.harness.gitcmd import configure_run_repo, git, unsafe_config
from saddler.harness.space import HarnessSpace

FAKE = FAKE_AGENT
PLANTER = """
import os, pathlib, sys
run = pathlib.Path(os.environ["EVODAG_DB"]).parents[1]  # the session view, RUN/sessions/evodag-view.sqlite
hooks = run / "harness" / ".git" / "hooks"
for name in ("post-checkout", "reference-transaction", "post-index-change", "pre-commit"):
    hook = hooks / name
    hook.write_text("#!/bin/sh\\necho $0 >> " + str(run.parent / "hook-ran") + "\\n")
    hook.chmod(0o755)
with (run / "harness" / ".git" / "config").open("a") as fh:
    fh.write("[core]\\n\\tfsmonitor = " + str(hooks / "post-checkout") + "\\n")
os.execv(sys.executable, [sys.executable, sys.argv[1], sys.argv[2]])
"""


def _hook_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    (repo / "saddler.toml").write_text('[harness]\nname = "x"\n[harness.components]\nsteering = ["a.txt"]\n')
    init_commit(repo, "base", branch="main")
    marker = tmp_path / "hook-ran"
    for name in ("post-checkout", "reference-transaction", "post-index-change", "pre-commit", "post-commit"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        hook.chmod(0o755)
    return repo


def test_saddlers_git_runs_no_hook_and_no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _hook_repo(tmp_path)
    marker = tmp_path / "hook-ran"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\tfsmonitor = {repo / '.git' / 'hooks' / 'post-checkout'}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    configure_run_repo(repo, "test")
    space = HarnessSpace(repo, tmp_path / "worktrees")
    head = space.resolve("HEAD")
    worktree = space.worktree(head, "it1-a0")
    (worktree / "a.txt").write_text("b\n")
    commit = space.commit_worktree(worktree, "edit")
    assert commit is not None
    space.keep(commit)
    space.snapshot(commit, tmp_path / "snaps")
    git(["status", "--porcelain"], worktree)
    space.remove_worktree(worktree)
    space.worktree(commit, "it2-a0")
    space.close()
    assert not marker.exists(), marker.read_text()


def test_unsafe_config_names_the_keys_that_run_code(tmp_path: Path) -> None:
    repo = _hook_repo(tmp_path)
    assert unsafe_config(repo / ".git") == []
    with (repo / ".git" / "config").open("a") as fh:
        fh.write('[filter "x"]\n\tclean = touch /tmp/x\n[core]\n\tfsmonitor = true\n[diff "y"]\n\ttextconv = cat\n')
    assert unsafe_config(repo / ".git") == ["core.fsmonitor", "diff.y.textconv", "filter.x.clean"]


@pytest.mark.slow
def test_a_session_that_writes_into_the_clone_is_discarded_and_its_writes_undone(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    planter = tmp_path / "planter.py"
    planter.write_text(PLANTER)
    command = f"{sys.executable} {planter} {FAKE} {{prompt_file}}"
    runner = CliRunner()
    sets = {"sessions.command": json.dumps(command), "loop.max_iterations": "1", "loop.batch_size": "3",
            "loop.test_runs": "1", "executor.workers": "1", "sessions.retries": "0"}  # fmt: skip
    args = ["init", str(run_dir), "--template", "opsdesk", "--backend", "command", "--seed", "1"]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "hook-ran").exists()  # saddler's own git never ran what the agent planted
    assert not (run_dir / "harness" / ".git" / "hooks" / "post-checkout").exists()
    assert "fsmonitor" not in (run_dir / "harness" / ".git" / "config").read_text()
    db = sqlite3.connect(run_dir / "evodag.sqlite")
    outcomes = {role: outcome for role, outcome in db.execute("SELECT role, outcome FROM sessions")}
    assert outcomes["diagnosis_patch"] == "failed:escaped", outcomes
    events = [json.loads(p) for (p,) in db.execute("SELECT payload FROM events WHERE kind = 'session.escaped'")]
    assert events and any("harness/.git/hooks/post-checkout (added)" in e["paths"] for e in events)
    assert any("harness/.git/config (changed)" in e["paths"] for e in events)
    assert db.execute("SELECT COUNT(*) FROM nodes WHERE parent_id IS NOT NULL").fetchone()[0] == 0


def test_what_saddler_writes_beside_a_session_is_not_the_sessions_escape(tmp_path: Path) -> None:
    """Rollouts still landing (or other iterations) write the store and traces while a session runs: not recorded
    then; the clone's own git files and the config still are."""
    from saddler.run.confinement import Allowance, FolderState, concurrent_writes, escapes

    run = tmp_path / "run"
    for rel in ("evodag.sqlite", "heldout/n3/dev/t-r0-s1/trace.txt", "saddler.toml", "harness/.git/config"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text("before\n")
    allowance = Allowance(worktree="worktrees/it4-a0", shared=concurrent_writes("harness/.git"))
    before = FolderState.take(run, allowance)
    for rel in ("evodag.sqlite", "heldout/n3/dev/t-r0-s1/trace.txt", "traces/n5/train/x-r0-s1/trace.txt"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text("a rollout landed\n")
    assert escapes(before, FolderState.take(run, allowance), allowance) == []
    (run / "harness/.git/config").write_text("[core]\n\thooksPath = /tmp/evil\n")
    (run / "saddler.toml").write_text("[run]\n")
    found = escapes(before, FolderState.take(run, allowance), allowance)
    assert found == [("harness/.git/config", "changed"), ("saddler.toml", "changed")]

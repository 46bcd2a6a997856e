"""`saddler init --harness` never silently drops uncommitted changes: it refuses naming them, or includes them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gitrepo import git, git_run
from typer.testing import CliRunner

from saddler.cli.app import app

runner = CliRunner()


def _repo(root: Path) -> Path:
    root.mkdir()
    (root / "agent.py").write_text("print('v1')\n")
    (root / "old.py").write_text("gone soon\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "system.md").write_text("You are a careful agent.\n")
    (root / "saddler.toml").write_text(
        '[harness]\nname = "h"\n[harness.components]\ncapability = ["*.py"]\nsteering = ["*.md"]\n'
    )
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "baseline")
    return root


def _dirty(repo: Path) -> None:
    (repo / "agent.py").write_text("print('v2, not committed')\n")  # modified
    (repo / "old.py").unlink()  # deleted
    (repo / "tools").mkdir()
    (repo / "tools" / "new_tool.py").write_text("def tool(): ...\n")  # untracked
    (repo / "debug.log").write_text("ignored\n")  # ignored: not part of the harness


def _show(run: Path, path: str) -> subprocess.CompletedProcess[str]:
    return git_run(run / "harness", "show", f"HEAD:{path}")


def test_init_refuses_a_harness_with_uncommitted_changes_naming_the_files(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    _dirty(repo)
    result = runner.invoke(app, ["init", str(tmp_path / "run"), "--harness", str(repo), "--benchmark", "opsdesk"])
    assert result.exit_code == 2  # the user's to fix
    assert "has 3 uncommitted file(s): agent.py, old.py, tools/new_tool.py." in result.output
    assert "--include-uncommitted" in result.output
    assert not (tmp_path / "run").exists()


def test_include_uncommitted_commits_them_as_the_baseline_in_the_clone_only(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    _dirty(repo)
    before = git_run(repo, "status", "--porcelain").stdout
    args = ["init", str(tmp_path / "run"), "--harness", str(repo), "--benchmark", "opsdesk", "--include-uncommitted"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "included 3 uncommitted file(s)" in result.output and "tools/new_tool.py" in result.output
    run = tmp_path / "run"
    assert _show(run, "agent.py").stdout == "print('v2, not committed')\n"
    assert _show(run, "tools/new_tool.py").stdout == "def tool(): ...\n"
    assert _show(run, "old.py").returncode != 0 and _show(run, "debug.log").returncode != 0
    baseline = subprocess.run(
        ["git", "rev-parse", "refs/saddler/baseline", "HEAD"], cwd=run / "harness", capture_output=True, text=True
    ).stdout.split()
    assert baseline[0] == baseline[1]
    log = git_run(run / "harness", "log", "--format=%s").stdout
    assert log.splitlines()[0] == "saddler: baseline includes 3 uncommitted file(s) of repo"
    after = git_run(repo, "status", "--porcelain").stdout
    assert after == before  # the user's repository is untouched


def test_run_folders_kept_inside_the_harness_repository_are_not_uncommitted_changes(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    for name in ("r1", "r2"):
        args = ["init", str(repo / "runs" / name), "--harness", str(repo), "--benchmark", "opsdesk"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert "uncommitted" not in result.output
        (repo / "runs" / name / "evodag.sqlite").write_bytes(b"")  # as after `saddler run`
    again = ["init", str(repo / "runs" / "r1"), "--harness", str(repo), "--benchmark", "opsdesk", "--force"]
    assert runner.invoke(app, again).exit_code == 0


def test_staged_changes_and_renames_count_as_uncommitted(tmp_path: Path) -> None:
    from saddler.harness.uncommitted import uncommitted_files

    repo = _repo(tmp_path / "repo")
    assert uncommitted_files(repo) == []
    (repo / "staged.py").write_text("x = 1\n")
    git(repo, "add", "staged.py")
    git(repo, "mv", "old.py", "renamed.py")
    (repo / "debug.log").write_text("ignored\n")
    assert uncommitted_files(repo) == ["old.py", "renamed.py", "staged.py"]
    (repo / "runs" / "r1").mkdir(parents=True)
    (repo / "runs" / "r1" / "evodag.sqlite").write_text("")  # a saddler run folder kept inside the repository
    (repo / "runs" / "r1" / "report.md").write_text("")
    assert uncommitted_files(repo) == ["old.py", "renamed.py", "staged.py"]

"""Fixtures for the harness-space and skill-mode tests: real git repositories in temporary folders."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gitrepo import git_run, init_commit

from saddler.harness.gitcmd import SAFE_PREFIX

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

SADDLER_TOML = """\
[harness]
name = "demo"
description = "a demo harness"

[harness.components]
capability = ["tools/**", "loop.py"]
steering = ["prompts/**", "**/*.md"]
protected = ["evals/**"]

[harness.structure]
skill_files = ["skills/**/SKILL.md"]
required_files = ["loop.py"]
"""

SKILL_MD = """\
---
name: demo-skill
description: Does the demo thing
---

# Demo

## Usage

Run ${CLAUDE_PLUGIN_ROOT}/bin/demo with ${INPUT}.

## Rules

Be brief.
"""

FILES = {
    "saddler.toml": SADDLER_TOML,
    "loop.py": "def run(task):\n    return task\n",
    "tools/search.py": "def search(q):\n    return [q]\n",
    "prompts/system.md": "You are a helpful agent.\nAnswer briefly.\nCheck your work.\n",
    "evals/grade.py": "def grade(x):\n    return 1.0\n",
    "skills/demo/SKILL.md": SKILL_MD,
}


def _git(*args: str, cwd: Path) -> str:
    return git_run(cwd, *args, check=True).stdout


def _write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="session")
def harness_files() -> dict[str, str]:
    """The demo harness `source_repo` commits: path -> text (saddler.toml with components and structure rules,
    loop.py, tools/search.py, prompts/system.md, the protected evals/grade.py, skills/demo/SKILL.md)."""
    return dict(FILES)


@pytest.fixture(scope="session")
def git_in() -> Callable[..., str]:
    """`git_in(*args, cwd=repo)`: git with a throwaway identity; returns stdout, raises on failure."""
    return _git


@pytest.fixture(scope="session")
def write_files() -> Callable[[Path, dict[str, str]], None]:
    """`write_files(root, {path: text})`: write each file below `root`, making folders as needed."""
    return _write_files


@pytest.fixture
def edit(write_files: Callable[[Path, dict[str, str]], None]) -> Callable[..., str]:
    """`edit(space, parent, files, message="edit", name="edit")`: commit `files` (a `HarnessSpace`'s) written over
    `parent` in the worktree `name`, then remove it; returns the commit."""

    def commit(space: Any, parent: str, files: dict[str, str], message: str = "edit", name: str = "edit") -> str:
        wt = space.worktree(parent, name)
        write_files(wt, files)
        sha = space.commit_worktree(wt, message)
        space.remove_worktree(wt)
        assert sha is not None
        return sha

    return commit


@pytest.fixture(scope="session")
def source_repo() -> Callable[..., Path]:
    """`source_repo(root, files=None)`: a user's harness repository at `root` with one commit on branch `main`
    (`files` default: the demo harness of `harness_files`); returns `root`."""

    def make(root: Path, files: dict[str, str] | None = None) -> Path:
        root.mkdir(parents=True)
        _write_files(root, FILES if files is None else files)
        init_commit(root, "initial harness", branch="main")
        return root

    return make


@pytest.fixture(scope="session")
def skill_repo() -> Callable[..., Path]:
    """`skill_repo(base, git=True)`: tests/fixtures/skill copied to base/repo (committed when `git`); returns the
    skill folder, base/repo/code-review."""

    def make(base: Path, git: bool = True) -> Path:
        repo = base / "repo"
        shutil.copytree(FIXTURES / "skill", repo)
        if git:
            for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "skill"]):
                _git(*args, cwd=repo)
        return repo / "code-review"

    return make


def _repo_snapshot(root: Path) -> dict[str, str]:
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if ".git" not in p.parts)
    return {
        "status": _git("status", "--porcelain=v1", "--ignored", "--untracked-files=all", cwd=root),
        "refs": _git("for-each-ref", "--format=%(refname) %(objectname)", cwd=root),
        "head": _git("rev-parse", "HEAD", cwd=root),
        "symbolic": _git("symbolic-ref", "-q", "HEAD", cwd=root),
        "config": _git("config", "--local", "--list", cwd=root),
        "worktrees": _git("worktree", "list", "--porcelain", cwd=root),
        "files": "\n".join(files),
        "contents": "\n".join((root / f).read_text() for f in files if (root / f).is_file()),
    }


@pytest.fixture(scope="session")
def repo_snapshot() -> Callable[[Path], dict[str, str]]:
    """`repo_snapshot(root)`: everything observable about a repository that saddler must never change (status,
    refs, HEAD, local config, worktrees, files and their contents)."""
    return _repo_snapshot


@pytest.fixture
def git_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every git process started through `subprocess.run` from now on, as its argv after `git` (a test asserts what
    an operation costs in git processes)."""
    calls: list[list[str]] = []
    real = subprocess.run

    def counting(args: Any, *rest: Any, **kwargs: Any) -> Any:
        if isinstance(args, list) and args and args[0] == "git":
            rest_args = list(args[1:])
            if tuple(rest_args[: len(SAFE_PREFIX)]) == SAFE_PREFIX:  # saddler's own git: hooks and code off
                rest_args = rest_args[len(SAFE_PREFIX) :]
            calls.append(rest_args)
        return real(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting)
    yield calls

"""Fixtures for the simulated benchmarks' patch-bank tests: a harness template as a committed git repository,
and bank patches applied to it the way the offline backend applies them (`git apply --3way`, one commit each)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from gitrepo import git_run, init_commit


def bank_git(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return git_run(cwd, *args, input=stdin)


def _template_repo(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest)
    init_commit(dest)  # checked: a failed commit raises
    return dest


def _apply_patches(repo: Path, diffs: dict[str, str], ids: list[str]) -> list[str]:
    failures = []
    for pid in ids:
        proc = bank_git(repo, "apply", "--3way", "-", stdin=diffs[pid])
        unmerged = bank_git(repo, "diff", "--name-only", "--diff-filter=U").stdout.strip()
        if proc.returncode or unmerged:
            failures.append(pid)
        bank_git(repo, "add", "-A")
        bank_git(repo, "commit", "-qm", pid)
    return failures


@pytest.fixture(scope="session")
def template_repo() -> Callable[[Path, Path], Path]:
    """`template_repo(template, dest)`: a copy of the harness template at `dest`, committed as the baseline."""
    return _template_repo


@pytest.fixture(scope="session")
def apply_patches() -> Callable[[Path, dict[str, str], list[str]], list[str]]:
    """`apply_patches(repo, diffs, ids)`: apply each patch (`git apply --3way`, then commit); the ids that did not
    apply cleanly (an error or unmerged paths)."""
    return _apply_patches


@pytest.fixture(scope="session")
def git_check() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`git_check(cwd, *args, stdin=None)`: run git there with a fixed identity."""
    return bank_git

"""The tests' one way to run git: a throwaway identity, no signing, no hooks, so a test's own commits never depend
on the machine's git config. Fixtures (`git_in`, `git_check`, `run_git`) and plain modules use these two."""

from __future__ import annotations

import subprocess
from pathlib import Path

SETTINGS = ("-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null")


def git_run(cwd: Path, *args: str, input: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
    """`git *args` in `cwd`; the finished process (not checked unless `check`: the test reads the result)."""
    return subprocess.run(["git", *SETTINGS, *args], cwd=cwd, input=input, capture_output=True, text=True, check=check)


def git(cwd: Path, *args: str, input: str | None = None) -> str:
    """`git *args` in `cwd`, checked (raises on failure); its stdout without the trailing newline."""
    return git_run(cwd, *args, input=input, check=True).stdout.rstrip("\n")


def init_commit(root: Path, message: str = "baseline", branch: str | None = None) -> str:
    """`git init` in `root` (on `branch`, else git's default), add everything, commit it as `message`; the commit."""
    git(root, "init", "-q", *(["-b", branch] if branch else []))
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")

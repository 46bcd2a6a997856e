"""The one way saddler calls git: the git CLI in a subprocess, no prompts, C locale, optional fixed dates.

`git(...)` raises `HarnessError` (with the command and git's stderr) when `check` is true and git fails;
with `check=False` the caller reads `returncode` itself (a conflict is data, not an exception).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from saddler.errors import HarnessError

Clock = Callable[[], float]


def git_env(clock: Clock | None = None) -> dict[str, str]:
    """Environment for git: never prompt, stable messages; commit dates from `clock` when given."""
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANG": "C", "GIT_OPTIONAL_LOCKS": "0"})
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"):
        env.pop(key, None)
    if clock is not None:
        stamp = f"{int(clock())} +0000"
        env["GIT_AUTHOR_DATE"] = stamp
        env["GIT_COMMITTER_DATE"] = stamp
    return env


def git(
    args: Sequence[str],
    cwd: Path,
    *,
    check: bool = True,
    input: str | None = None,
    clock: Clock | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `git <args>` in `cwd` and return the completed process (text mode)."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            input=input,
            env=git_env(clock),
            check=False,
        )
    except FileNotFoundError as exc:
        raise HarnessError(f"cannot run git in {cwd}: {exc}; install git and check the folder exists") from exc
    if check and proc.returncode != 0:
        raise HarnessError(f"git {' '.join(args)} failed in {cwd} (exit {proc.returncode}): {_tail(proc.stderr)}")
    return proc


def git_bytes(args: Sequence[str], cwd: Path) -> bytes:
    """Run `git <args>` and return raw stdout (archives, binary diffs); raises `HarnessError` on failure."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, env=git_env(), check=False)
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace")
        raise HarnessError(f"git {' '.join(args)} failed in {cwd} (exit {proc.returncode}): {_tail(stderr)}")
    return proc.stdout


def _tail(text: str, limit: int = 800) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]

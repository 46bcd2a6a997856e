"""Shared builders for the skill-mode tests: a copy of the fixture skill in a real git repo."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "skill"


def skill_repo(tmp_path: Path, git: bool = True) -> Path:
    """Copy tests/fixtures/skill into tmp_path/repo (committed when `git`); returns the skill folder."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    if git:
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "skill"]):
            subprocess.run(
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
                cwd=repo,
                check=True,
                capture_output=True,
            )
    return repo / "code-review"

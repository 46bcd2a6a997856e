"""Shared builders for the harness-space tests: real git repositories in temporary folders."""

from __future__ import annotations

import subprocess
from pathlib import Path

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


def sh(*args: str, cwd: Path) -> str:
    """Run git in `cwd` with a throwaway identity; return stdout (raises on failure)."""
    proc = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def make_source_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    """A user's harness repository with one commit on branch `main`."""
    root.mkdir(parents=True)
    write_files(root, FILES if files is None else files)
    sh("init", "-q", "-b", "main", cwd=root)
    sh("add", "-A", cwd=root)
    sh("commit", "-q", "-m", "initial harness", cwd=root)
    return root


def repo_snapshot(root: Path) -> dict[str, str]:
    """Everything observable about a repository that saddler must never change."""
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if ".git" not in p.parts)
    return {
        "status": sh("status", "--porcelain=v1", "--ignored", "--untracked-files=all", cwd=root),
        "refs": sh("for-each-ref", "--format=%(refname) %(objectname)", cwd=root),
        "head": sh("rev-parse", "HEAD", cwd=root),
        "symbolic": sh("symbolic-ref", "-q", "HEAD", cwd=root),
        "config": sh("config", "--local", "--list", cwd=root),
        "worktrees": sh("worktree", "list", "--porcelain", cwd=root),
        "files": "\n".join(files),
        "contents": "\n".join((root / f).read_text() for f in files if (root / f).is_file()),
    }

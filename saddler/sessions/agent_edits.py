"""What the agent did to its worktree, against what it claims: commits it made itself are undone (its edits kept)
so saddler commits and diffs the change, and a diagnosis's claim is reconciled with the files that changed.
"""

from __future__ import annotations

from pathlib import Path

from saddler.harness.gitcmd import git
from saddler.sessions.schema import DiagnosisResult


def finish_diagnosis(result: DiagnosisResult, worktree: Path) -> DiagnosisResult:
    """Reconcile the agent's claim with the worktree: `patched` with no change becomes `no_patch`,
    changed files fill `hypothesis.files` when the agent left it empty, outcome follows status."""
    changed = changed_files(worktree)
    if result.status == "patched" and not changed:
        result = result.model_copy(
            update={"status": "no_patch", "reason": "the agent reported a patch but the worktree is unchanged"}
        )
    if result.status == "patched" and result.hypothesis is not None and not result.hypothesis.files:
        result = result.model_copy(update={"hypothesis": result.hypothesis.model_copy(update={"files": changed})})
    if result.status == "no_patch" and result.stats.outcome == "ok":
        result = result.model_copy(update={"stats": result.stats.model_copy(update={"outcome": "no_patch"})})
    return result


def head_commit(worktree: Path) -> str | None:
    """The worktree's HEAD commit, or None when it is not a git checkout."""
    proc = git(["rev-parse", "HEAD"], worktree, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def undo_agent_commits(worktree: Path, start: str | None) -> bool:
    """If the agent committed (HEAD moved from `start`), move HEAD back keeping its changes in the working
    tree, so saddler's own commit and diff see them; returns whether anything was undone."""
    if start is None or head_commit(worktree) in (None, start):
        return False
    git(["reset", "-q", "--soft", start], worktree)
    return True


def changed_files(worktree: Path) -> list[str]:
    """Paths (relative to `worktree`) that differ from HEAD, untracked files included, sorted."""
    proc = git(["status", "--porcelain", "--untracked-files=all", "-z"], worktree, check=False)
    if proc.returncode != 0:
        return []
    paths = []
    entries = proc.stdout.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":
                i += 1  # rename/copy: the next entry is the source path
        i += 1
    return sorted(set(paths))

"""The git harness space: the run's own clone of a harness, candidate worktrees, commits and diffs.

The user's original repository is never written to. Every candidate is a real commit kept reachable by
a ref `refs/saddler/c/<sha>`; candidates are edited in isolated worktrees under `worktrees_dir`.
Hot paths call the git CLI directly (GitPython leaks processes in long runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from saddler.config import HarnessConfig


@dataclass
class GitResult:
    """Outcome of a git operation that may legitimately fail (a conflict is data, not an exception)."""

    ok: bool
    commit: str | None = None
    error: str = ""


class HarnessSpace:
    """One run's harness repository (`repo_dir`) and its candidate worktrees (`worktrees_dir`)."""

    def __init__(self, repo_dir: Path, worktrees_dir: Path) -> None:
        raise NotImplementedError

    @classmethod
    def create(cls, source: Path, repo_dir: Path, worktrees_dir: Path) -> HarnessSpace:
        """Clone `source` (a git repo: its HEAD; or a plain folder such as a template: copied and
        committed as the baseline) into `repo_dir`. `source` is never modified."""
        raise NotImplementedError

    @property
    def config(self) -> HarnessConfig:
        """`[harness]` read from the baseline commit's saddler.toml."""
        raise NotImplementedError

    def baseline_commit(self) -> str:
        raise NotImplementedError

    def tree_of(self, commit: str) -> str:
        raise NotImplementedError

    def worktree(self, commit: str, name: str) -> Path:
        """A fresh isolated worktree at `commit` (detached) named `name`; replaces a stale one."""
        raise NotImplementedError

    def checkout(self, commit: str) -> Path:
        """A shared, clean checkout of `commit` for evaluation (created once, reused)."""
        raise NotImplementedError

    def remove_worktree(self, path: Path) -> None:
        raise NotImplementedError

    def prune(self) -> None:
        """Remove every candidate worktree and run `git worktree prune` (safe after a crash)."""
        raise NotImplementedError

    def commit_worktree(self, path: Path, message: str) -> str | None:
        """Commit all changes in the worktree; the new sha, or None when nothing changed."""
        raise NotImplementedError

    def diff(self, a: str, b: str) -> str:
        raise NotImplementedError

    def changed_files(self, a: str, b: str) -> list[str]:
        raise NotImplementedError

    def numstat(self, a: str, b: str) -> tuple[int, int]:
        """(lines added, lines removed) from a to b."""
        raise NotImplementedError

    def classify(self, path: str) -> str:
        """capability | steering | protected | unclassified, by the component map (protected wins)."""
        raise NotImplementedError

    def patch_kind(self, paths: list[str]) -> str:
        """capability | steering | mixed | unclassified for a set of changed paths."""
        raise NotImplementedError

    def protected_paths(self, paths: list[str]) -> list[str]:
        raise NotImplementedError

    def apply_patch(self, worktree: Path, diff: str) -> GitResult:
        """`git apply --3way` the diff in the worktree (not committed)."""
        raise NotImplementedError

    def cherry_pick(self, onto: str, edge_parent: str, edge_child: str, message: str) -> GitResult:
        """Apply the change edge_parent→edge_child onto `onto` with a 3-way merge; commit on success."""
        raise NotImplementedError

    def revert(self, onto: str, edge_parent: str, edge_child: str, message: str) -> GitResult:
        """Undo the change edge_parent→edge_child on top of `onto` (3-way); commit on success."""
        raise NotImplementedError

    def validate(self, worktree: Path, parent_commit: str) -> list[str]:
        """Structure-rule problems of the worktree's content (empty = valid)."""
        raise NotImplementedError

    def export_tree(self, commit: str, dest: Path) -> None:
        raise NotImplementedError

    def bundle(self, commit: str, dest: Path) -> None:
        raise NotImplementedError

"""Moving a change between candidates: `cherry_pick` and `revert`, applied on a private index (no worktree).

Mixed into `HarnessSpace` (which provides `repo_dir`, `git_dir`, `clock`, `resolve`, `tree_of`, `diff`, `keep` and the
sha caches).
A conflict is data (`GitResult.ok` false with the files named), never an exception.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from saddler.harness.gitcmd import Clock
from saddler.harness.plumbing import apply_on_index, commit_tree


@dataclass
class GitResult:
    """Outcome of a git operation that may legitimately fail (a conflict is data, not an exception)."""

    ok: bool
    commit: str | None = None
    error: str = ""


class TransplantMixin:
    """Transplanting edges; see the module docstring."""

    repo_dir: Path
    git_dir: Path
    clock: Clock | None
    _commits: set[str]
    _trees: dict[str, str]
    diff: Callable[[str, str], str]  # provided by `DiffsMixin` (a stub method here would hide it)

    def resolve(self, rev: str) -> str:  # provided by HarnessSpace
        raise NotImplementedError

    def tree_of(self, commit: str) -> str:  # provided by HarnessSpace
        raise NotImplementedError

    def keep(self, sha: str) -> None:  # provided by HarnessSpace
        raise NotImplementedError

    def cherry_pick(self, onto: str, edge_parent: str, edge_child: str, message: str) -> GitResult:
        """Apply the change edge_parent→edge_child onto `onto` with a 3-way merge; commit on success."""
        return self._transplant(onto, edge_parent, edge_child, message, "cherry-pick")

    def revert(self, onto: str, edge_parent: str, edge_child: str, message: str) -> GitResult:
        """Undo the change edge_parent→edge_child on top of `onto` (3-way); commit on success."""
        return self._transplant(onto, edge_child, edge_parent, message, "revert")

    def _transplant(self, onto: str, a: str, b: str, message: str, what: str) -> GitResult:
        """a→b applied onto `onto` as `git apply --3way` in a clean worktree would, but on a private index."""
        diff = self.diff(a, b)  # binary-safe, full index lines: what `git apply --3way` needs
        if not diff.strip():
            return GitResult(False, error=f"{what}: {a[:12]}..{b[:12]} changes nothing")
        onto = self.resolve(onto)
        tree, error = apply_on_index(self.repo_dir, self.git_dir, onto, diff)
        if tree is None:
            return GitResult(False, error=f"{what}: {error}")
        if tree == self.tree_of(onto):
            return GitResult(False, error=f"{what}: nothing left to change on {onto[:12]}")
        sha = commit_tree(self.repo_dir, tree, onto, message, self.clock)
        self.keep(sha)
        self._trees[sha] = tree
        return GitResult(True, commit=sha)

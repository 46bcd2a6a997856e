"""Diffs between a run's commits, remembered, and a worktree's change staged (mixed into `HarnessSpace`, which
provides `repo_dir` and `baseline_commit`).

What a full sha names never changes, so the diff text and numstat of a pair of full shas are asked of git once
(one `git diff --numstat -p`) and remembered. A worktree's change is staged with its diff against the worktree's
HEAD, and the baseline's stat beside it (two reads, side by side): when it is committed (`_remember_staged`) these
are the new commit's diffs, so the loop's questions about it (changed files, lines changed, the edge's text) need
no git at all.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from saddler.harness.gitcmd import git, git_all, worktree_admin_dir
from saddler.harness.plumbing import DiffStat, parse_numstat, parse_numstat_patch

_SHA = re.compile(r"[0-9a-f]{40}")
_STAT_ARGS = ("--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--numstat", "-z")
_DIFF_ARGS = (*_STAT_ARGS, "--binary", "--full-index", "-p")  # full blob ids: what `git apply --3way` needs
_MEMO = 256  # remembered diff texts / stats per space (a diff is asked for 2-3 times right after it is made)
_T = TypeVar("_T")


@dataclass(frozen=True)
class StagedChange:
    """A worktree's edit, staged: its tree and its binary-safe diff against the worktree's HEAD `head`, which is
    `diff(head, c)` of the commit `c` made of it, with its `stat`."""

    tree: str
    patch: bytes
    head: str
    stat: DiffStat


class DiffsMixin:
    """Remembered diffs and staged changes; see the module docstring."""

    repo_dir: Path
    git_dir: Path
    baseline_commit: Callable[[], str]  # provided by `HarnessSpace`

    def __init__(self) -> None:
        self._stats: OrderedDict[tuple[str, str], DiffStat] = OrderedDict()
        self._diffs: OrderedDict[tuple[str, str], str] = OrderedDict()
        # the latest change staged (a commit follows its staging at once), with its baseline and baseline -> tree stat
        self._staged: tuple[StagedChange, str, DiffStat | None] | None = None

    def worktree_change(self, path: Path) -> StagedChange:
        """Everything changed in the worktree against its HEAD (untracked files included), staged: `patch` is a
        binary-safe diff of it, what a diagnosis session did, stored so a resumed run can re-create it with
        `apply_change`; `tree` is what `commit_worktree(path, message, tree=tree)` commits."""
        path = Path(path)
        git(["add", "-A"], path)
        tree = git(["write-tree"], path).stdout.strip()
        head, base = worktree_head(path), self.baseline_commit()
        calls = [(["diff", *_DIFF_ARGS, head, tree], self.repo_dir)]
        if base != head:  # and the baseline -> commit stat (a node's lines changed), side by side
            calls.append((["diff", *_STAT_ARGS, base, tree], self.repo_dir))
        outs = git_all(calls, env=self._neutral())
        stat, text = parse_numstat_patch(outs[0].stdout)
        change = StagedChange(tree, text.encode("utf-8", "surrogateescape"), head, stat)
        self._staged = (change, base, parse_numstat(outs[1].stdout) if len(outs) > 1 else None)
        return change

    def _neutral(self) -> dict[str, str]:
        """git's environment for a diff of two trees that no attributes of any checkout change: an empty work tree
        and an index that does not exist (git reads `.gitattributes` from those), so a diff is the same whether it is
        asked in a session's worktree or in the clone."""
        empty = self.git_dir / "saddler-neutral"
        empty.mkdir(exist_ok=True)
        return {"GIT_WORK_TREE": str(empty), "GIT_INDEX_FILE": str(self.git_dir / "saddler-neutral.index")}

    def _remember_staged(self, head: str, tree: str, sha: str) -> None:
        """`sha` was just made of the change staged at (`head`, `tree`): its diffs are the staged ones."""
        if self._staged is None or (self._staged[0].head, self._staged[0].tree) != (head, tree):
            return
        change, base, from_base = self._staged
        self._staged = None
        self._remember(self._diffs, (head, sha), change.patch.decode("utf-8", "surrogateescape"))
        self._remember(self._stats, (head, sha), change.stat)
        if from_base is not None:
            self._remember(self._stats, (base, sha), from_base)

    def diff(self, a: str, b: str) -> str:
        """Unified diff from `a` to `b` (binary-safe, no rename detection)."""
        key = (a, b)
        if key not in self._diffs:
            return self._diff_and_stat(a, b)[0]
        return self._diffs[key]

    def diff_stat(self, a: str, b: str) -> DiffStat:
        """Changed paths (sorted; a rename shows as both paths) and lines added / removed (binary files count 0
        lines); the same git process as `diff` of the pair."""
        key = (a, b)
        if key not in self._stats:
            return self._diff_and_stat(a, b)[1]
        return self._stats[key]

    def _diff_and_stat(self, a: str, b: str) -> tuple[str, DiffStat]:
        """The text diff and the numstat of a→b from one `git diff --numstat -p` (both remembered)."""
        stat, text = parse_numstat_patch(git(["diff", *_DIFF_ARGS, a, b], self.repo_dir, env=self._neutral()).stdout)
        return self._remember(self._diffs, (a, b), text), self._remember(self._stats, (a, b), stat)

    def changed_files(self, a: str, b: str) -> list[str]:
        """Paths that differ between `a` and `b`, sorted (a rename shows as both paths)."""
        return list(self.diff_stat(a, b).files)

    def numstat(self, a: str, b: str) -> tuple[int, int]:
        """(lines added, lines removed) from a to b; binary files count as 0."""
        stat = self.diff_stat(a, b)
        return stat.added, stat.removed

    def _remember(self, memo: OrderedDict[tuple[str, str], _T], key: tuple[str, str], value: _T) -> _T:
        """Store `value` when both ends are full shas (immutable); keep the newest `_MEMO` entries."""
        if _SHA.fullmatch(key[0]) and _SHA.fullmatch(key[1]):
            memo[key] = value
            while len(memo) > _MEMO:
                memo.popitem(last=False)
        return value


def worktree_head(worktree: Path) -> str:
    """The sha a worktree's HEAD is at, read from its admin folder when HEAD is detached (no subprocess)."""
    admin = worktree_admin_dir(worktree)
    try:
        head = (admin / "HEAD").read_text(encoding="utf-8").strip() if admin is not None else ""
    except OSError:
        head = ""
    return head if _SHA.fullmatch(head) else git(["rev-parse", "HEAD"], worktree).stdout.strip()

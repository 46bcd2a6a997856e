"""One removed candidate worktree kept for the next: a checkout of the next commit costs a third of `git worktree
add` (which writes every file and a new admin entry), and a run makes one per diagnosis attempt.

`park(path)` moves a worktree that is no longer needed to `<worktrees_dir>/.spare` instead of deleting it;
`take(path, sha)` moves it to `path` and makes it exactly `sha`: `git checkout -f --detach` then `git clean -ffdx`
(edits, staged, untracked and ignored files gone, HEAD detached at `sha`, whatever branch or commit the session
made). Only a worktree git itself left idle is parked: one whose admin entry holds anything beyond git's plain
bookkeeping (a merge, rebase, lock, sparse checkout, its own config) is deleted instead, and a parked one that
fails its checkout gives way to a fresh `git worktree add`. A move is git's own `worktree move` done in-process:
rename the folder, then point its admin entry's `gitdir` at it. A crash in between leaves a folder that the next
start's prune deletes (with its entry) like any other candidate worktree.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from saddler.harness.gitcmd import git, worktree_admin_dir
from saddler.harness.trash import Trash

SPARE_NAME = ".spare"  # not a valid candidate worktree name (those start with a letter or digit)
_IDLE_ENTRIES = frozenset({"HEAD", "ORIG_HEAD", "commondir", "gitdir", "index", "logs", "COMMIT_EDITMSG", "AUTO_MERGE"})


class SpareWorktree:
    """At most one parked worktree of the repository `git_dir` whose worktrees live in `worktrees_dir`; it belongs
    to this object (a process), never to one made later on the same folders: those prune first."""

    def __init__(self, git_dir: Path, worktrees_dir: Path, trash: Trash) -> None:
        self.path = Path(worktrees_dir) / SPARE_NAME
        self._admin_root = Path(git_dir).resolve() / "worktrees"
        self._trash = trash
        self._parked = False
        self._lock = threading.Lock()

    def park(self, worktree: Path) -> bool:
        """Keep `worktree` (no longer used by anyone) for `take`; False when it was not kept (another is parked,
        or it is not an idle worktree of this repository): the caller deletes it."""
        with self._lock:
            admin = worktree_admin_dir(worktree)
            if self._parked or admin is None or admin.parent != self._admin_root or not _idle(admin):
                return False
            self._parked = _move(worktree, self.path)
            return self._parked

    def take(self, worktree: Path, sha: str) -> bool:
        """Make `worktree` (a free path) the parked worktree, checked out clean at `sha`; False when none is parked
        or it cannot be reused (then it is deleted and the caller adds a fresh worktree)."""
        with self._lock:
            if not self._parked:
                return False
            self._parked = False
            if _move(self.path, worktree):
                checkout = git(["checkout", "-q", "-f", "--detach", sha], worktree, check=False)
                if checkout.returncode == 0 and git(["clean", "-q", "-ffdx"], worktree, check=False).returncode == 0:
                    return True
                self._trash.discard(worktree)
            elif self.path.exists():
                self._trash.discard(self.path)
            return False

    def forget(self) -> None:
        """The parked worktree was deleted (a prune): nothing is parked."""
        with self._lock:
            self._parked = False


def _idle(admin: Path) -> bool:
    """Nothing in the admin entry but what git keeps for a worktree at rest."""
    return all(entry.name in _IDLE_ENTRIES for entry in admin.iterdir())


def _move(src: Path, dest: Path) -> bool:
    """What `git worktree move src dest` does, without a process; False (nothing moved) when `src` is no worktree."""
    admin = worktree_admin_dir(src)
    if admin is None:
        return False
    try:
        os.rename(src, dest)
    except OSError:
        return False
    (admin / "gitdir").write_text(f"{dest / '.git'}\n", encoding="utf-8")
    return True

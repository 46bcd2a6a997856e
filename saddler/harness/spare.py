"""One removed candidate worktree kept for the next: a checkout of the next commit costs a third of `git worktree
add` (which writes every file and a new admin entry), and a run makes one per diagnosis attempt.

`park(path)` moves a worktree that is no longer needed to `<worktrees_dir>/.spare` instead of deleting it;
`take(path, sha)` moves it to `path` and makes it exactly `sha`: its index and the last session's history in its
admin entry are dropped, then `git checkout -f --detach` and `git clean -ffdx` (edits, staged, untracked and
ignored files gone, index flags gone, HEAD detached at `sha`, whatever branch or commit the session made). Only a
worktree git itself left idle is parked: one whose admin entry holds anything beyond git's plain bookkeeping (a
merge, rebase, lock, sparse checkout, its own config) is deleted instead, and a parked one that fails its checkout
gives way to a fresh `git worktree add`. A move is git's own `worktree move` done in-process: rename the folder,
then point its admin entry's `gitdir` at it. A crash in between leaves a folder that the next start's prune
deletes (with its entry) like any other candidate worktree.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from saddler.files import remove_path
from saddler.harness.gitcmd import git, worktree_admin_dir
from saddler.harness.trash import Trash

SPARE_NAME = ".spare"  # not a valid candidate worktree name (those start with a letter or digit)
_SESSION_TRACES = ("index", "ORIG_HEAD", "COMMIT_EDITMSG", "AUTO_MERGE", "logs")  # dropped before a reuse
_IDLE_ENTRIES = frozenset({"HEAD", "commondir", "gitdir", *_SESSION_TRACES})  # all a worktree at rest holds


class SpareWorktree:
    """At most one parked worktree of the repository `git_dir` whose worktrees live in `worktrees_dir`; it belongs
    to this object (a process), never to one made later on the same folders: those prune first.

    `prepare(sha)` checks the parked worktree out at `sha` in a background thread (the loop calls it while the
    parent's batch is evaluated, when the next diagnosis's parent is known): a `take` of that sha then runs no
    git at all. Every other call waits for a preparation to finish first."""

    def __init__(self, git_dir: Path, worktrees_dir: Path, trash: Trash) -> None:
        self.path = Path(worktrees_dir) / SPARE_NAME
        self._admin_root = Path(git_dir).resolve() / "worktrees"
        self._trash = trash
        self._parked = False
        self._ready: str | None = None  # the sha the parked worktree is exactly (clean), when known
        self._job: threading.Thread | None = None
        self._lock = threading.Lock()

    def park(self, worktree: Path) -> bool:
        """Keep `worktree` (no longer used by anyone) for `take`; False when it was not kept (another is parked,
        or it is not an idle worktree of this repository): the caller deletes it."""
        with self._lock:
            self._wait()
            admin = worktree_admin_dir(worktree)
            if self._parked or admin is None or admin.parent != self._admin_root or not _idle(admin):
                return False
            self._parked, self._ready = _move(worktree, self.path), None
            return self._parked

    def prepare(self, sha: str) -> None:
        """Start checking the parked worktree out clean at `sha` in the background (nothing when none is parked)."""
        with self._lock:
            self._wait()
            if self._parked and self._ready != sha:
                self._job = threading.Thread(target=self._check_out, args=(sha,), name="saddler-worktree", daemon=True)
                self._job.start()

    def take(self, worktree: Path, sha: str) -> bool:
        """Make `worktree` (a free path) the parked worktree, checked out clean at `sha`; False when none is parked
        or it cannot be reused (then it is deleted and the caller adds a fresh worktree)."""
        with self._lock:
            self._wait()
            if not self._parked:
                return False
            self._parked, ready, self._ready = False, self._ready, None
            if not _move(self.path, worktree):
                if self.path.exists():
                    self._trash.discard(self.path)
                return False
            if ready == sha or reset_checkout(worktree, sha):
                return True
            self._trash.discard(worktree)
            return False

    def forget(self) -> None:
        """The parked worktree is to be deleted (a prune): nothing is parked."""
        with self._lock:
            self._wait()
            self._parked, self._ready = False, None

    def wait(self) -> None:
        """Block until a background preparation has finished."""
        with self._lock:
            self._wait()

    def _check_out(self, sha: str) -> None:
        try:
            self._ready = sha if reset_checkout(self.path, sha) else None
        except Exception:  # a fault (a full disk): `take` checks out again and meets it there
            self._ready = None

    def _wait(self) -> None:
        if self._job is not None:
            self._job.join()
            self._job = None


def reset_checkout(worktree: Path, sha: str) -> bool:
    """Make `worktree` exactly what `git worktree add --detach` of `sha` makes: HEAD detached there, every file
    written afresh (the index is dropped first: the flags a session set in it, skip-worktree or assume-unchanged,
    would hide edits, and a checkout keeps them), no untracked or ignored file left, no history of the last session
    in the admin entry."""
    admin = worktree_admin_dir(worktree)
    if admin is None:
        return False
    for name in _SESSION_TRACES:
        remove_path(admin / name)
    checkout = git(["checkout", "-q", "-f", "--detach", sha], worktree, check=False)
    return checkout.returncode == 0 and git(["clean", "-q", "-ffdx"], worktree, check=False).returncode == 0


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

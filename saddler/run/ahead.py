"""Work the loop starts ahead of time, on one low-priority thread, so it overlaps rollouts it does not depend on.

An iteration's diagnosis needs a fresh worktree of the parent (`git worktree add`: three git processes, the
largest git cost of an iteration). Making it does not depend on the parent's batch rollouts, so the loop asks for
it before evaluating the batch, and the diagnosis takes it when it starts (`Prepared.take`); when no diagnosis
follows (the parent passes every task) it is removed. The thread runs at `nice` 19 (on Linux a per-thread
setting, inherited by the git processes it starts): this work only takes CPU the rollouts leave idle. A failure
surfaces where the work is taken, as if it had been done there; work nobody takes is discarded, failure and all.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from saddler.harness.space import HarnessSpace


def _lower_priority() -> None:
    with contextlib.suppress(OSError):
        os.nice(19)


class Prepared:
    """A worktree being made ahead (`Ahead.worktree`): `take()` waits for it, `discard()` removes it unused."""

    def __init__(self, space: HarnessSpace, name: str, future: Future[Path]) -> None:
        self.space, self.name, self._future = space, name, future
        self._taken = False

    def take(self) -> Path:
        """The worktree (raises what making it raised); from now on it is the caller's to remove."""
        self._taken = True
        return self._future.result()

    def discard(self) -> None:
        """Remove the worktree unless it was taken (a failure to make it is dropped: nobody needed it)."""
        if self._taken:
            return
        self._taken = True
        try:
            path = self._future.result()
        except Exception:  # unused work: its failure changes nothing
            return
        self.space.remove_worktree(path)


class Ahead:
    """One low-priority worker thread for the loop's work-ahead; `close()` waits for what it is doing."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="saddler-ahead", initializer=_lower_priority)

    def worktree(self, space: HarnessSpace, commit: str, name: str) -> Prepared:
        """Start making `space.worktree(commit, name)`."""
        return Prepared(space, name, self._pool.submit(space.worktree, commit, name))

    def close(self) -> None:
        self._pool.shutdown(wait=True)

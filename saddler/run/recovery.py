"""Start-up recovery of a run folder after a crash, under its run lock (issue 12, item 4).

A SIGKILLed run can leave git lock files behind (`refs/saddler/c/<sha>.lock`, `index.lock`, `config.lock`,
`HEAD.lock`, `packed-refs.lock`, a worktree's `index.lock`): git then refuses every later write to them. The run
lock proves nobody else works on this folder, so every git lock older than the moment it was taken belongs to a
process that is gone: remove it and say so (one line each, and an event). Candidate worktrees are then pruned
(`HarnessSpace.prune`, when the run context opens). A progress-plot draft an older saddler's plot helper was
writing when the run died (`.progress.png.draft-<pid>`) is deleted without a word: the plot is drawn again at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evodag.store import EvoDAG
from saddler.harness.gitcmd import remove_stale_locks
from saddler.reporting.plot import PLOT_NAME
from saddler.run.folder import RunPaths


def recover_after_crash(
    paths: RunPaths, harness_rel: str, lock_taken_at: float, store: EvoDAG, say: Callable[[str], None]
) -> list[Path]:
    """Remove the git lock files a killed run left in the run's harness repository (returned) and its plot drafts."""
    for draft in paths.root.glob(f".{PLOT_NAME}.draft-*"):
        draft.unlink(missing_ok=True)
    git_dir = paths.harness(harness_rel) / ".git"
    if not git_dir.is_dir():
        return []
    removed = remove_stale_locks(git_dir, lock_taken_at)
    for path in removed:
        rel = path.relative_to(paths.root)
        say(f"removed a stale git lock left by a killed run: {rel}")
        store.log_event("recovery.git_lock_removed", {"path": str(rel)})
    return removed

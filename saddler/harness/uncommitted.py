"""Uncommitted changes in the user's harness repository, found before `saddler init --harness` clones it.

A clone takes the committed HEAD only, so edits not yet committed would silently be left out of the baseline.
`uncommitted_files` names them (modified, staged, deleted, renamed and untracked files; ignored files are not
part of the harness); `carry_uncommitted` copies their working-tree state into the run's clone and commits it
there as the baseline. The user's repository is only read.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from saddler.harness.gitcmd import Clock, git


def uncommitted_files(repo: Path, *, exclude: Path | None = None) -> list[str]:
    """Sorted paths (relative to `repo`, a repository's top folder) whose working-tree state differs from HEAD,
    untracked ones included. Paths inside `exclude` (the run folder being made) or inside any saddler run folder
    kept in the repository are left out: they are run output, not harness.

    Read-only inspection of the user's repository, once per `init`: GitPython says it plainly (index against
    HEAD, working tree against index, untracked files), and the `Repo` is closed before returning."""
    from git import Repo

    with Repo(repo) as handle:
        staged = handle.index.diff("HEAD")  # what `git add` changed against HEAD
        unstaged = handle.index.diff(None)  # the working tree against the index, deletions included
        paths = {p for d in (*staged, *unstaged) for p in (d.a_path, d.b_path) if p} | set(handle.untracked_files)
    root = Path(repo).resolve()
    skip = Path(exclude).resolve() if exclude is not None else None
    return sorted({p for p in paths if not _in_run_folder(root, p, skip)})


def _in_run_folder(root: Path, rel: str, skip: Path | None) -> bool:
    """Inside `skip`, or inside a saddler run folder (one holding an evodag.sqlite): run output, not harness."""
    path = root / rel
    if skip is not None and path.is_relative_to(skip):
        return True
    return any((parent / "evodag.sqlite").is_file() for parent in path.parents if parent.is_relative_to(root))


def carry_uncommitted(source: Path, clone: Path, files: list[str], *, clock: Clock | None = None) -> None:
    """Copy the working-tree state of `files` from `source` into `clone` (a deleted file is deleted) and commit
    it: the clone's HEAD is then the baseline."""
    for rel in files:
        src, dst = Path(source) / rel, Path(clone) / rel
        if dst.is_symlink() or dst.is_file():
            dst.unlink()
        if src.is_symlink():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    git(["add", "-A", "--", *files], clone)
    message = f"saddler: baseline includes {len(files)} uncommitted file(s) of {Path(source).name}"
    git(["commit", "-q", "--no-verify", "--allow-empty", "-m", message], clone, clock=clock)

"""Git plumbing the harness space uses instead of worktrees where no worktree is needed.

A change is applied on a *private index* (`GIT_INDEX_FILE` in the repository's git dir, one per call): `read-tree`
the base, `apply --cached --3way`, `write-tree`; a commit is `commit-tree` plus one `update-ref --stdin`. No files
are checked out, so nothing needs deleting afterwards, and concurrent calls never share an index.
"""

from __future__ import annotations

import io
import itertools
import os
import re
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from saddler.harness.gitcmd import Clock, git, git_bytes

KEEP_PREFIX = "refs/saddler/c/"  # every candidate commit is kept reachable by KEEP_PREFIX + its sha
_index_ids = itertools.count()
_GIT_SPACE = " \t\n\r\v\f"


def stripspace(message: str) -> str:
    """The message exactly as `git commit -m` stores it (cleanup mode "whitespace"): trailing whitespace of
    each line removed, runs of empty lines collapsed to one, leading and trailing empty lines dropped, one
    final newline. `commit-tree` stores its message verbatim, so shas match only after this."""
    lines: list[str] = []
    gap = False
    for line in message.split("\n"):
        line = line.rstrip(_GIT_SPACE)
        if not line:
            gap = bool(lines)
            continue
        if gap:
            lines.append("")
            gap = False
        lines.append(line)
    return "\n".join(lines) + "\n" if lines else ""


@dataclass(frozen=True)
class DiffStat:
    """What changed between two commits: sorted paths and the total lines added / removed (binary = 0)."""

    files: list[str]
    added: int
    removed: int


def parse_numstat(out: str) -> DiffStat:
    """Parse `git diff --no-renames --numstat -z` (records `added<TAB>removed<TAB>path<NUL>`)."""
    files: list[str] = []
    added = removed = 0
    for record in out.split("\0"):
        if not record:
            continue
        plus, minus, path = record.split("\t", 2)
        added += int(plus) if plus.isdigit() else 0
        removed += int(minus) if minus.isdigit() else 0
        files.append(path)
    return DiffStat(sorted(files), added, removed)


_NUMSTAT_RECORD = re.compile(r"(\d+|-)\t(\d+|-)\t[^\0]*\0")


def parse_numstat_patch(out: str) -> tuple[DiffStat, str]:
    """Split the output of `git diff --no-renames --numstat -z -p`: its numstat records (each
    `added<TAB>removed<TAB>path<NUL>`), one NUL, then the patch exactly as `git diff -p` prints it alone."""
    end = 0
    while match := _NUMSTAT_RECORD.match(out, end):
        end = match.end()
    patch = out[end + 1 :] if end and out[end : end + 1] == "\0" else out[end:]
    return parse_numstat(out[:end]), patch


@contextmanager
def private_index(git_dir: Path) -> Iterator[dict[str, str]]:
    """An index file of one's own for plumbing commands (the environment to pass to `git`); removed after."""
    path = git_dir / f"saddler-index-{os.getpid()}-{next(_index_ids)}"
    try:
        yield {"GIT_INDEX_FILE": str(path)}
    finally:
        path.unlink(missing_ok=True)
        Path(str(path) + ".lock").unlink(missing_ok=True)


def apply_on_index(repo_dir: Path, git_dir: Path, onto: str, patch: str) -> tuple[str | None, str]:
    """`patch` applied to the tree of `onto` like `git apply --3way` in a clean checkout would: the resulting
    tree, or (None, why): "conflict in: a, b" (3-way merge conflicts) or "patch does not apply: ...". The
    repository's own index and every worktree are left alone."""
    patch = patch if patch.endswith("\n") else patch + "\n"
    with private_index(git_dir) as env:
        git(["read-tree", onto], repo_dir, env=env)
        apply = ["apply", "--cached", "--whitespace=nowarn", "-"]
        three = git([*apply[:2], "--3way", *apply[2:]], repo_dir, check=False, input=patch, env=env)
        if three.returncode != 0:
            unmerged = git(["ls-files", "-u", "-z"], repo_dir, check=False, env=env).stdout
            conflicts = sorted({rec.split("\t", 1)[1] for rec in unmerged.split("\0") if "\t" in rec})
            if conflicts:
                return None, "conflict in: " + ", ".join(conflicts)
            git(["read-tree", onto], repo_dir, env=env)
            plain = git(apply, repo_dir, check=False, input=patch, env=env)
            if plain.returncode != 0:
                return None, "patch does not apply: " + (plain.stderr or three.stderr).strip()[-600:]
        return git(["write-tree"], repo_dir, env=env).stdout.strip(), ""


def commit_tree(repo_dir: Path, tree: str, parent: str, message: str, clock: Clock | None) -> str:
    """A commit of `tree` on `parent` with `message` (cleaned as `git commit -m` would), dated by `clock`."""
    text = stripspace(message).rstrip("\n")
    return git(["commit-tree", tree, "-p", parent, "-m", text], repo_dir, clock=clock).stdout.strip()


def extract_tree(repo_dir: Path, treeish: str, dest: Path) -> None:
    """Write the files of `treeish` (no .git) into the existing folder `dest` with one `git archive`."""
    data = git_bytes(["archive", "--format=tar", treeish], repo_dir)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover - Python < 3.11.4
            tar.extractall(dest)

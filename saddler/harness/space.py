"""The git harness space: the run's own clone of a harness, candidate worktrees, commits and diffs.

The user's original repository is never written to. Every candidate is a real commit kept reachable by
a ref `refs/saddler/c/<sha>`; candidates are edited in isolated worktrees under `worktrees_dir`.
Hot paths call the git CLI directly (GitPython leaks processes in long runs).
"""

from __future__ import annotations

import fcntl
import io
import itertools
import os
import re
import shutil
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from saddler.config import HarnessConfig, parse_saddler_file
from saddler.errors import ConfigError, HarnessError
from saddler.harness import components
from saddler.harness.gitcmd import Clock, configure_run_repo, drop_dead_worktree_entries, git, git_bytes, is_repo_root
from saddler.harness.structure import check_structure

BASELINE_REF = "refs/saddler/baseline"
KEEP_PREFIX = "refs/saddler/c/"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SKIP_COPY = shutil.ignore_patterns(".git", "__pycache__", "*.pyc")
_temp_ids = itertools.count()


@dataclass
class GitResult:
    """Outcome of a git operation that may legitimately fail (a conflict is data, not an exception)."""

    ok: bool
    commit: str | None = None
    error: str = ""


class HarnessSpace:
    """One run's harness repository (`repo_dir`) and its candidate worktrees (`worktrees_dir`).

    `clock`, when given, fixes commit dates (seconds since the epoch) so the same inputs give the same shas.
    """

    def __init__(self, repo_dir: Path, worktrees_dir: Path, *, clock: Clock | None = None) -> None:
        self.repo_dir = Path(repo_dir).resolve()
        self.worktrees_dir = Path(worktrees_dir).resolve()
        self.clock = clock
        if not (self.repo_dir / ".git").is_dir():
            raise HarnessError(f"{self.repo_dir} is not a harness repository; create it with HarnessSpace.create")
        common = git(["rev-parse", "--git-common-dir"], self.repo_dir).stdout.strip()
        self.git_dir = (self.repo_dir / common).resolve()
        self.worktrees_dir.mkdir(parents=True, exist_ok=True)

    @classmethod
    def create(
        cls,
        source: Path,
        repo_dir: Path,
        worktrees_dir: Path,
        *,
        clock: Clock | None = None,
        uncommitted: list[str] | None = None,
    ) -> HarnessSpace:
        """Clone `source` (a git repo: its HEAD; or a plain folder such as a template: copied and
        committed as the baseline) into `repo_dir`. `source` is never modified. `uncommitted` (paths of a git
        `source`, see `saddler.harness.uncommitted`) are carried over and committed on top: that is the baseline."""
        source, repo_dir = Path(source).resolve(), Path(repo_dir).resolve()
        if not source.is_dir():
            raise HarnessError(f"harness source {source} is not a folder; pass a harness repository or a template")
        if repo_dir.exists() and any(repo_dir.iterdir()):
            raise HarnessError(f"{repo_dir} already exists and is not empty; open it with HarnessSpace() instead")
        if is_repo_root(source):
            if git(["rev-parse", "--verify", "-q", "HEAD"], source, check=False).returncode != 0:
                raise HarnessError(f"{source} has no commits; commit the harness once before optimizing it")
            repo_dir.parent.mkdir(parents=True, exist_ok=True)
            git(["clone", "-q", "--no-hardlinks", str(source), str(repo_dir)], repo_dir.parent)
            git(["remote", "remove", "origin"], repo_dir)
            configure_run_repo(repo_dir, str(source))
            if uncommitted:
                from saddler.harness.uncommitted import carry_uncommitted

                carry_uncommitted(source, repo_dir, uncommitted, clock=clock)
        else:
            shutil.copytree(source, repo_dir, ignore=_SKIP_COPY, symlinks=True, dirs_exist_ok=True)
            git(["init", "-q", "-b", "main"], repo_dir)
            configure_run_repo(repo_dir, str(source))
            git(["add", "-A"], repo_dir)
            git(
                ["commit", "-q", "--no-verify", "--allow-empty", "-m", f"saddler: baseline from {source.name}"],
                repo_dir,
                clock=clock,
            )
        head = git(["rev-parse", "HEAD"], repo_dir).stdout.strip()
        git(["update-ref", BASELINE_REF, head], repo_dir)
        space = cls(repo_dir, worktrees_dir, clock=clock)
        space.keep(head)
        return space

    @cached_property
    def config(self) -> HarnessConfig:
        """`[harness]` read from the baseline commit's saddler.toml (defaults when it has none)."""
        text = self.read_file(self.baseline_commit(), "saddler.toml")
        if text is None:
            return HarnessConfig()
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"saddler.toml of the baseline harness: invalid TOML: {exc}") from exc
        return parse_saddler_file(data, "saddler.toml of the baseline harness").harness or HarnessConfig()

    def baseline_commit(self) -> str:
        """The sha the run started from."""
        proc = git(["rev-parse", "--verify", "-q", BASELINE_REF], self.repo_dir, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else self.resolve("HEAD")

    def resolve(self, rev: str) -> str:
        """The full sha of a commit-ish; `HarnessError` when it names no commit."""
        proc = git(["rev-parse", "--verify", "-q", f"{rev}^{{commit}}"], self.repo_dir, check=False)
        if proc.returncode != 0:
            raise HarnessError(f"{rev!r} is not a commit of {self.repo_dir}")
        return proc.stdout.strip()

    def keep(self, sha: str) -> None:
        """Keep `sha` reachable forever with `refs/saddler/c/<sha>`."""
        git(["update-ref", KEEP_PREFIX + sha, sha], self.repo_dir)

    def tree_of(self, commit: str) -> str:
        """The tree hash of `commit` (what rollout caches key on)."""
        return git(["rev-parse", f"{commit}^{{tree}}"], self.repo_dir).stdout.strip()

    def read_file(self, commit: str, path: str) -> str | None:
        """The text of `path` at `commit`, or None when the commit has no such file."""
        proc = git(["cat-file", "-p", f"{commit}:{components.normalize(path)}"], self.repo_dir, check=False)
        return proc.stdout if proc.returncode == 0 else None

    # -- worktrees -------------------------------------------------------------------------------------

    def worktree(self, commit: str, name: str) -> Path:
        """A fresh isolated worktree at `commit` (detached) named `name`; replaces a stale one."""
        if not _NAME.fullmatch(name):
            raise HarnessError(f"worktree name {name!r} must be one path segment of letters, digits, '.', '_', '-'")
        sha = self.resolve(commit)
        path = self.worktrees_dir / name
        self._forget(path)
        git(["worktree", "add", "-q", "--detach", str(path), sha], self.repo_dir)
        return path

    def checkout(self, commit: str) -> Path:
        """A shared, clean checkout of `commit` for evaluation (created once, reused).

        Creation holds a file lock and is marked complete by `.locks/eval-<sha12>.ready`, so concurrent
        callers (threads or processes) never see a half-created checkout; one left by a crash is rebuilt."""
        sha = self.resolve(commit)
        path = self.worktrees_dir / f"eval-{sha[:12]}"
        locks = self.worktrees_dir / ".locks"
        ready = locks / f"{path.name}.ready"
        if ready.is_file() and (path / ".git").is_file():
            return path
        locks.mkdir(exist_ok=True)
        with open(locks / f"{path.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (ready.is_file() and (path / ".git").is_file()):
                ready.unlink(missing_ok=True)
                self.worktree(sha, path.name)
                ready.write_text(sha + "\n")
        return path

    def remove_worktree(self, path: Path) -> None:
        """Delete a worktree folder and its registration (no error when it is already gone)."""
        self._forget(Path(path))

    def prune(self) -> None:
        """Remove every candidate worktree and run `git worktree prune` (safe after a crash)."""
        for child in self.worktrees_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        drop_dead_worktree_entries(self.git_dir)
        git(["worktree", "prune"], self.repo_dir)

    def _forget(self, path: Path) -> None:
        path = path.resolve()
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        drop_dead_worktree_entries(self.git_dir)

    # -- commits and diffs -----------------------------------------------------------------------------

    def commit_worktree(self, path: Path, message: str) -> str | None:
        """Commit all changes in the worktree; the new sha, or None when nothing changed."""
        git(["add", "-A"], path)
        if git(["diff", "--cached", "--quiet"], path, check=False).returncode == 0:
            return None
        git(["commit", "-q", "--no-verify", "-m", message], path, clock=self.clock)
        sha = git(["rev-parse", "HEAD"], path).stdout.strip()
        self.keep(sha)
        return sha

    def worktree_change(self, path: Path) -> bytes:
        """Everything changed in the worktree against its HEAD (untracked files included) as a binary-safe diff:
        what a diagnosis session did, stored so a resumed run can re-create it with `apply_change`."""
        git(["add", "-A"], path)
        return git_bytes(["diff", "--cached", "--binary", "--full-index", "--no-renames", "--no-color", "HEAD"], path)

    def apply_change(self, path: Path, change: bytes) -> None:
        """Re-create a stored `worktree_change` in a fresh worktree of the same commit (raises `HarnessError` when
        it does not apply: the worktree is not at the commit the change was taken from)."""
        if change:
            text = change.decode("utf-8", "surrogateescape")
            git(["apply", "--binary", "--index", "--whitespace=nowarn", "-"], path, input=text)

    def diff(self, a: str, b: str) -> str:
        """Unified diff from `a` to `b` (binary-safe, no rename detection)."""
        return git(["diff", "--no-color", "--no-ext-diff", "--no-renames", "--binary", a, b], self.repo_dir).stdout

    def changed_files(self, a: str, b: str) -> list[str]:
        """Paths that differ between `a` and `b`, sorted (a rename shows as both paths)."""
        out = git(["diff", "--no-renames", "--name-only", "-z", a, b], self.repo_dir).stdout
        return sorted(p for p in out.split("\0") if p)

    def numstat(self, a: str, b: str) -> tuple[int, int]:
        """(lines added, lines removed) from a to b; binary files count as 0."""
        out = git(["diff", "--no-renames", "--numstat", a, b], self.repo_dir).stdout
        added = removed = 0
        for line in out.splitlines():
            plus, minus, _ = line.split("\t", 2)
            added += int(plus) if plus.isdigit() else 0
            removed += int(minus) if minus.isdigit() else 0
        return added, removed

    # -- component map ---------------------------------------------------------------------------------

    def classify(self, path: str) -> str:
        """capability | steering | protected | unclassified, by the component map (protected wins)."""
        return components.classify(path, self.config.components)

    def patch_kind(self, paths: list[str]) -> str:
        """capability | steering | mixed | unclassified for a set of changed paths."""
        return components.patch_kind(paths, self.config.components)

    def protected_paths(self, paths: list[str]) -> list[str]:
        """The paths among `paths` the component map protects."""
        return components.protected_paths(paths, self.config.components)

    def check_change(self, parent: str, candidate: str) -> list[str]:
        """Problems of the change parent→candidate as a whole: empty, or touching protected paths."""
        changed = self.changed_files(parent, candidate)
        if not changed:
            return ["empty change: the candidate is identical to its parent"]
        return [f"protected path touched: {p}" for p in self.protected_paths(changed)]

    # -- applying changes ------------------------------------------------------------------------------

    def apply_patch(self, worktree: Path, diff: str) -> GitResult:
        """`git apply --3way` the diff in the worktree (not committed).

        On failure the worktree is reset to its HEAD (uncommitted edits and untracked files are dropped)
        and `error` names the conflicting files or git's complaint."""
        if not diff.strip():
            return GitResult(False, error="empty patch")
        patch = diff if diff.endswith("\n") else diff + "\n"
        three = git(["apply", "--3way", "--whitespace=nowarn", "-"], worktree, check=False, input=patch)
        if three.returncode == 0:
            return GitResult(True)
        unmerged = git(["diff", "--name-only", "--diff-filter=U", "-z"], worktree, check=False).stdout
        conflicts = sorted({p for p in unmerged.split("\0") if p})
        self._reset(worktree)
        if conflicts:
            return GitResult(False, error="conflict in: " + ", ".join(conflicts))
        plain = git(["apply", "--whitespace=nowarn", "-"], worktree, check=False, input=patch)
        if plain.returncode == 0:
            return GitResult(True)
        self._reset(worktree)
        return GitResult(False, error="patch does not apply: " + (plain.stderr or three.stderr).strip()[-600:])

    def _reset(self, worktree: Path) -> None:
        git(["reset", "-q", "--hard", "HEAD"], worktree)
        git(["clean", "-q", "-fd"], worktree)

    def cherry_pick(self, onto: str, edge_parent: str, edge_child: str, message: str) -> GitResult:
        """Apply the change edge_parent→edge_child onto `onto` with a 3-way merge; commit on success."""
        return self._transplant(onto, edge_parent, edge_child, message, "cherry-pick")

    def revert(self, onto: str, edge_parent: str, edge_child: str, message: str) -> GitResult:
        """Undo the change edge_parent→edge_child on top of `onto` (3-way); commit on success."""
        return self._transplant(onto, edge_child, edge_parent, message, "revert")

    def _transplant(self, onto: str, a: str, b: str, message: str, what: str) -> GitResult:
        diff = git(["diff", "--no-renames", "--binary", "--full-index", a, b], self.repo_dir).stdout
        if not diff.strip():
            return GitResult(False, error=f"{what}: {a[:12]}..{b[:12]} changes nothing")
        wt = self.worktree(onto, f"tmp-{what}-{os.getpid()}-{next(_temp_ids)}")
        try:
            applied = self.apply_patch(wt, diff)
            if not applied.ok:
                return GitResult(False, error=f"{what}: {applied.error}")
            sha = self.commit_worktree(wt, message)
            if sha is None:
                return GitResult(False, error=f"{what}: nothing left to change on {onto[:12]}")
            return GitResult(True, commit=sha)
        finally:
            self.remove_worktree(wt)

    # -- validation and export -------------------------------------------------------------------------

    def validate(self, worktree: Path, parent_commit: str) -> list[str]:
        """Structure-rule problems of the worktree's content (empty = valid)."""
        tracked = git(["diff", "--no-renames", "--name-only", "-z", parent_commit], worktree).stdout
        untracked = git(["ls-files", "--others", "--exclude-standard", "-z"], worktree).stdout
        changed = sorted({p for p in (tracked + "\0" + untracked).split("\0") if p})
        return check_structure(
            Path(worktree), self.config.structure, changed, lambda rel: self.read_file(parent_commit, rel)
        )

    def export_tree(self, commit: str, dest: Path) -> None:
        """Write the files of `commit` (no .git) into `dest`, which must be absent or empty."""
        dest = Path(dest)
        if dest.exists() and any(dest.iterdir()):
            raise HarnessError(f"export folder {dest} is not empty; remove it or choose another")
        data = git_bytes(["archive", "--format=tar", self.resolve(commit)], self.repo_dir)
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, filter="data")
            else:  # pragma: no cover - Python < 3.11.4
                tar.extractall(dest)

    def bundle(self, commit: str, dest: Path) -> None:
        """Write a git bundle of `commit`'s history to `dest`; `git clone dest` checks out branch main."""
        sha = self.resolve(commit)
        dest = Path(dest).resolve()
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="saddler-bundle-") as tmp:
            git(["init", "-q", "--bare", tmp], self.repo_dir)
            git(["push", "-q", tmp, f"{sha}:refs/heads/main"], self.repo_dir)
            git(["symbolic-ref", "HEAD", "refs/heads/main"], Path(tmp))
            git(["bundle", "create", str(dest), "HEAD", "main"], Path(tmp))

"""The git harness space: the run's own clone of a harness, candidate worktrees, commits and diffs.

The user's original repository is never written to. Every candidate is a real commit kept reachable by
a ref `refs/saddler/c/<sha>` (set through one long-lived `git update-ref --stdin`, `saddler.harness.gitbatch`);
candidates are edited in isolated worktrees under `worktrees_dir` (`git worktree add`). Where no one edits files,
no worktree is made: evaluation gets a snapshot of the tree (`snapshot`, read through one long-lived
`git cat-file --batch`), cherry-pick and revert run on a private index (`saddler.harness.plumbing`). What a full
sha names never changes, so its tree, its diffs and its numstat against another sha are asked of git once and
remembered (`saddler.harness.diffs`). Hot paths call the git CLI directly (GitPython leaks processes in long runs).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import tomllib
from functools import cached_property
from pathlib import Path

from saddler.config import HarnessConfig, parse_saddler_file
from saddler.errors import ConfigError, HarnessError, UncommittedHarnessError
from saddler.files import remove_path
from saddler.harness import components
from saddler.harness.diffs import DiffsMixin, StagedChange, worktree_head
from saddler.harness.gitbatch import ObjectReader, RefWriter
from saddler.harness.gitcmd import (
    Clock,
    configure_run_repo,
    drop_dead_worktree_entries,
    git,
    is_repo_root,
    worktree_admin_dir,
)
from saddler.harness.plumbing import (
    KEEP_PREFIX,
    commit_tree,
    extract_tree,
    stripspace,
)
from saddler.harness.structure import check_structure
from saddler.harness.transplant import GitResult, TransplantMixin

BASELINE_REF = "refs/saddler/baseline"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SHA = re.compile(r"[0-9a-f]{40}")
_SKIP_COPY = shutil.ignore_patterns(".git", "__pycache__", "*.pyc")


__all__ = ["BASELINE_REF", "KEEP_PREFIX", "GitResult", "HarnessSpace", "StagedChange"]


class HarnessSpace(TransplantMixin, DiffsMixin):
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
        self._refs = RefWriter(self.repo_dir)
        self._objects = ObjectReader(self.repo_dir)
        self._commits: set[str] = set()  # full shas known to name commits
        self._trees: dict[str, str] = {}  # commit sha -> tree sha
        self._baseline: str | None = None
        DiffsMixin.__init__(self)

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
                raise UncommittedHarnessError(f"{source} has no commits; commit the harness once before optimizing it")
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
        if self._baseline is not None:
            return self._baseline
        proc = git(["rev-parse", "--verify", "-q", BASELINE_REF], self.repo_dir, check=False)
        if proc.returncode != 0:
            return self.resolve("HEAD")
        self._baseline = proc.stdout.strip()
        self._commits.add(self._baseline)  # the baseline ref names a commit: `resolve` needs no git for it
        return self._baseline

    def resolve(self, rev: str) -> str:
        """The full sha of a commit-ish; `HarnessError` when it names no commit."""
        if rev in self._commits:
            return rev
        found = self._object(f"{rev}^{{commit}}")
        if found is None:
            raise HarnessError(f"{rev!r} is not a commit of {self.repo_dir}")
        self._commits.add(found[0])
        return found[0]

    def keep(self, sha: str) -> None:
        """Keep `sha` reachable forever with `refs/saddler/c/<sha>`."""
        self._refs.update({KEEP_PREFIX + sha: sha})
        self._commits.add(sha)

    def tree_of(self, commit: str) -> str:
        """The tree hash of `commit` (what rollout caches key on)."""
        if commit not in self._trees:
            found = self._object(f"{commit}^{{tree}}")
            if found is None:
                raise HarnessError(f"{commit!r} names no tree of {self.repo_dir}")
            tree = found[0]
            if not _SHA.fullmatch(commit):
                return tree
            self._trees[commit] = tree
        return self._trees[commit]

    def _object(self, name: str) -> tuple[str, str, bytes] | None:
        """What the long-lived reader answers for `name`; None also for a name it cannot be asked (a blank one, one
        with a newline), which names no commit or tree."""
        return self._objects.read(name) if name.strip() and "\n" not in name else None

    def read_file(self, commit: str, path: str) -> str | None:
        """The text of `path` at `commit`, or None when the commit has no such file."""
        name = f"{commit}:{components.normalize(path)}"
        if "\n" in name:  # cannot be asked of the long-lived reader: one process
            proc = git(["cat-file", "blob", name], self.repo_dir, check=False)
            return proc.stdout if proc.returncode == 0 else None
        found = self._objects.read(name)
        return found[2].decode("utf-8", "surrogateescape") if found is not None and found[1] == "blob" else None

    # -- worktrees -------------------------------------------------------------------------------------

    def worktree(self, commit: str, name: str) -> Path:
        """An isolated worktree at `commit` (detached, clean: exactly the commit's files) named `name`; replaces a
        stale one."""
        if not _NAME.fullmatch(name):
            raise HarnessError(f"worktree name {name!r} must be one path segment of letters, digits, '.', '_', '-'")
        sha = self.resolve(commit)
        path = self.worktrees_dir / name
        self._forget(path)
        git(["worktree", "add", "-q", "--detach", str(path), sha], self.repo_dir)
        return path

    def snapshot(self, commit: str, root: Path) -> Path:
        """The files of `commit` (no .git) in `root/<tree sha>`, made once per tree (`_extract`).

        Read-only by contract: rollouts get their own copy of it, never this folder. It appears complete or
        not at all (built beside it, then renamed), so concurrent callers, threads or processes, are safe."""
        tree = self.tree_of(self.resolve(commit))
        dest = Path(root) / tree
        if dest.is_dir():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{tree[:12]}-", dir=dest.parent))
        try:
            self._extract(tree, tmp)
            os.rename(tmp, dest)
        except OSError:
            if not dest.is_dir():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return dest

    def remove_worktree(self, path: Path) -> None:
        """Take a worktree away (no error when it is already gone): deleted with its registration."""
        self._forget(Path(path))

    def discard_worktree(self, path: Path) -> None:
        """Delete a worktree whatever it holds (an agent wrote outside it, or into its `.git`): never reused."""
        self._forget(Path(path))

    def reset_worktree(self, path: Path, sha: str) -> None:
        """Make a worktree exactly `sha` again (HEAD detached there, every edit, staged or untracked file gone)."""
        if not _reset_checkout(Path(path), sha):
            raise HarnessError(f"cannot reset the worktree {path} to {sha[:12]}")

    def prune(self) -> None:
        """Remove every candidate worktree and run `git worktree prune` (safe after a crash)."""
        shutil.rmtree(self.git_dir / "saddler-trash", ignore_errors=True)  # what an older saddler left to delete
        for child in self.worktrees_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        drop_dead_worktree_entries(self.git_dir)
        git(["worktree", "prune"], self.repo_dir)

    def _forget(self, path: Path) -> None:
        path = path.resolve()
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path, ignore_errors=True)
        drop_dead_worktree_entries(self.git_dir)

    def close(self) -> None:
        """End the long-lived git processes this space keeps (`saddler.harness.gitbatch`); using the space again
        starts them again. Nothing is lost by not calling it: they end with this process."""
        self._refs.close()
        self._objects.close()

    # -- commits and diffs -----------------------------------------------------------------------------

    def commit_worktree(self, path: Path, message: str, *, tree: str | None = None) -> str | None:
        """Commit all changes in the worktree (as `git add -A; git commit -m message` would: same sha); the new
        sha, or None when nothing changed. The worktree's HEAD moves to it and it is kept. `tree` is the worktree
        as `worktree_change` just staged it (nothing edited since): then it is not staged again."""
        path = Path(path).resolve()
        if tree is None:
            git(["add", "-A"], path)
            tree = git(["write-tree"], path).stdout.strip()
        head = worktree_head(path)
        if tree == self.tree_of(head):
            return None
        if not stripspace(message):
            raise HarnessError("commit message is empty; give the commit a message")
        sha = commit_tree(self.repo_dir, tree, head, message, self.clock)
        admin = worktree_admin_dir(path)
        head_ref = {f"worktrees/{admin.name}/HEAD": sha} if admin is not None else {}
        self._refs.update({**head_ref, KEEP_PREFIX + sha: sha})  # the worktree's HEAD moves to it, and it is kept
        self._commits.add(sha)
        self._trees[sha] = tree
        self._remember_staged(head, tree, sha)
        return sha

    def apply_change(self, path: Path, change: bytes) -> None:
        """Re-create a stored `worktree_change` in a fresh worktree of the same commit (raises `HarnessError` when
        it does not apply: the worktree is not at the commit the change was taken from)."""
        if change:
            text = change.decode("utf-8", "surrogateescape")
            git(["apply", "--binary", "--index", "--whitespace=nowarn", "-"], path, input=text)

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

    # -- validation and export -------------------------------------------------------------------------

    def validate_commit(self, worktree: Path, parent_commit: str, commit: str) -> list[str]:
        """Structure-rule problems (empty = valid) of a worktree just committed as `commit` by `commit_worktree`
        (its files are that commit's): the changed paths come from the remembered parent→commit stat."""
        return check_structure(
            Path(worktree),
            self.config.structure,
            self.changed_files(parent_commit, commit),
            lambda rel: self.read_file(parent_commit, rel),
        )

    def export_tree(self, commit: str, dest: Path) -> None:
        """Write the files of `commit` (no .git) into `dest`, which must be absent or empty."""
        dest = Path(dest)
        if dest.exists() and any(dest.iterdir()):
            raise HarnessError(f"export folder {dest} is not empty; remove it or choose another")
        sha = self.resolve(commit)
        dest.mkdir(parents=True, exist_ok=True)
        self._extract(self.tree_of(sha), dest)

    def _extract(self, tree: str, dest: Path) -> None:
        """The files of `tree` into the empty folder `dest`: read through the long-lived reader, or, when attributes
        (line endings, filters, export-ignore) may apply, written by `git archive` as a checkout would see them."""
        if self._attributes_outside_trees or not self._objects.extract(tree, dest):
            extract_tree(self.repo_dir, tree, dest)

    @cached_property
    def _attributes_outside_trees(self) -> bool:
        """Whether git applies attributes to checkouts of this repository from outside its trees: its
        `info/attributes` or the user's (`$XDG_CONFIG_HOME/git/attributes`; saddler's git reads no system or user
        config, so neither `/etc/gitattributes` nor a `core.attributesFile` outside the clone applies). Asked once
        per space (one `git config`)."""
        configured = git(["config", "--type=path", "--get", "core.attributesFile"], self.repo_dir, check=False)
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        candidates = [self.git_dir / "info" / "attributes", Path(xdg) / "git" / "attributes"]
        if configured.returncode == 0 and configured.stdout.strip():
            candidates.append(Path(configured.stdout.strip()))
        return any(path.is_file() for path in candidates)

    def bundle(self, commit: str, dest: Path) -> None:
        """Write a git bundle of `commit`'s history to `dest`; `git clone dest` checks out branch main."""
        sha = self.resolve(commit)
        dest = Path(dest).resolve()
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="saddler-bundle-") as tmp:
            # a scratch repository that borrows this one's objects (alternates): nothing is copied into it
            git(["init", "-q", "--bare", "-b", "main", tmp], self.repo_dir)
            info = Path(tmp) / "objects" / "info"
            info.mkdir(parents=True, exist_ok=True)
            (info / "alternates").write_text(f"{self.git_dir / 'objects'}\n", encoding="utf-8")
            git(["update-ref", "refs/heads/main", sha], Path(tmp))
            git(["bundle", "create", str(dest), "HEAD", "main"], Path(tmp))


_SESSION_TRACES = ("index", "ORIG_HEAD", "COMMIT_EDITMSG", "AUTO_MERGE", "logs")  # dropped before a reset


def _reset_checkout(worktree: Path, sha: str) -> bool:
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

"""`RefWriter`: ref updates through one long-lived `git update-ref --stdin`, on real temporary repositories."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from saddler.errors import HarnessError
from saddler.harness.gitbatch import ObjectReader, RefWriter
from saddler.harness.space import HarnessSpace


@pytest.fixture
def space(tmp_path: Path, source_repo: Callable[..., Path]) -> HarnessSpace:
    return HarnessSpace.create(source_repo(tmp_path / "src"), tmp_path / "run" / "harness", tmp_path / "run" / "wt")


def _rev(cwd: Path, name: str) -> str:
    proc = subprocess.run(["git", "rev-parse", "-q", "--verify", name], cwd=cwd, capture_output=True, text=True)
    return proc.stdout.strip()


def test_updates_are_transactions_of_one_process(space: HarnessSpace, git_calls: list[list[str]]) -> None:
    base = space.baseline_commit()
    writer = RefWriter(space.repo_dir)
    git_calls.clear()
    try:
        for i in range(5):
            writer.update({f"refs/test/a{i}": base, f"refs/test/b{i}": base})
        assert git_calls == []  # no process per update
        pid = writer._proc.pid if writer._proc else None
        writer.update({"refs/test/c": base})
        assert writer._proc is not None and writer._proc.pid == pid
    finally:
        writer.close()
    assert all(_rev(space.repo_dir, f"refs/test/{n}{i}") == base for n in "ab" for i in range(5))


def test_a_worktree_head_is_set_from_the_repository(space: HarnessSpace, git_in: Callable[..., str]) -> None:
    base = space.baseline_commit()
    wt = space.worktree(base, "w1")
    (wt / "loop.py").write_text("# changed\n")
    sha = space.commit_worktree(wt, "change")
    assert sha is not None
    assert git_in("rev-parse", "HEAD", cwd=wt).strip() == sha  # the worktree's own HEAD moved
    assert _rev(space.repo_dir, f"refs/saddler/c/{sha}") == sha
    assert _rev(space.repo_dir, "HEAD") != sha  # the clone's HEAD did not


def test_a_refused_transaction_sets_nothing_says_why_and_the_next_works(space: HarnessSpace) -> None:
    base = space.baseline_commit()
    writer = RefWriter(space.repo_dir)
    try:
        with pytest.raises(HarnessError, match=r"update-ref --no-deref --stdin failed .* refs/test/bad.*invalid"):
            writer.update({"refs/test/good": base, "refs/test/bad": "0" * 39})
        assert _rev(space.repo_dir, "refs/test/good") == ""
        writer.update({"refs/test/after": base})
        assert _rev(space.repo_dir, "refs/test/after") == base
    finally:
        writer.close()


def test_close_ends_the_process_and_a_later_update_starts_another(space: HarnessSpace) -> None:
    base = space.baseline_commit()
    writer = RefWriter(space.repo_dir)
    writer.update({"refs/test/one": base})
    proc = writer._proc
    writer.close()
    assert proc is not None and proc.poll() is not None
    writer.update({"refs/test/two": base})
    writer.close()
    assert _rev(space.repo_dir, "refs/test/two") == base


def _tree_listing(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every entry under `root`: kind, permission bits and content (a symlink's target)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel, st = str(path.relative_to(root)), path.lstat()
        if path.is_symlink():
            out[rel] = ("link", 0, os.readlink(path).encode())
        elif path.is_dir():
            out[rel] = ("dir", st.st_mode & 0o777, b"")
        else:
            out[rel] = ("file", st.st_mode & 0o777, path.read_bytes())
    return out


@pytest.fixture
def odd_tree(space: HarnessSpace, git_in: Callable[..., str]) -> str:
    """A commit with nested folders, an executable, a symlink, binary and non-UTF-8 names, and a submodule."""
    wt = space.worktree(space.baseline_commit(), "odd")
    (wt / "deep" / "er" / "est").mkdir(parents=True)
    (wt / "deep" / "er" / "est" / "x.txt").write_text("deep\n")
    (wt / "run.sh").write_text("#!/bin/sh\n")
    (wt / "run.sh").chmod(0o755)
    os.symlink("deep/er", wt / "link")
    (wt / "blob.bin").write_bytes(bytes(range(256)) * 10)
    (wt / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")
    git_in("add", "-A", cwd=wt)
    git_in("update-index", "--add", "--cacheinfo", f"160000,{space.baseline_commit()},vendor/sub", cwd=wt)
    sha = space.commit_worktree(wt, "odd", tree=git_in("write-tree", cwd=wt).strip())
    space.remove_worktree(wt)
    assert sha is not None
    return sha


def test_extract_writes_what_git_archive_writes(space: HarnessSpace, odd_tree: str, tmp_path: Path) -> None:
    from saddler.harness.plumbing import extract_tree

    reader = ObjectReader(space.repo_dir)
    try:
        (tmp_path / "fast").mkdir()
        (tmp_path / "archive").mkdir()
        assert reader.extract(space.tree_of(odd_tree), tmp_path / "fast")
        extract_tree(space.repo_dir, odd_tree, tmp_path / "archive")
        assert _tree_listing(tmp_path / "fast") == _tree_listing(tmp_path / "archive")
        assert _tree_listing(tmp_path / "fast")["run.sh"][1] == 0o755
    finally:
        reader.close()


def test_reads_answer_as_git_does(space: HarnessSpace, odd_tree: str, git_in: Callable[..., str]) -> None:
    reader = ObjectReader(space.repo_dir)
    try:
        tree = git_in("rev-parse", f"{odd_tree}^{{tree}}", cwd=space.repo_dir).strip()
        found = reader.read(f"{odd_tree}^{{tree}}")
        assert found is not None and found[:2] == (tree, "tree")
        blob = reader.read(f"{odd_tree}:deep/er/est/x.txt")
        assert blob is not None and blob[1:] == ("blob", b"deep\n")
        assert reader.read(f"{odd_tree}:no/such/file") is None
        assert reader.read("f" * 40) is None
        with pytest.raises(HarnessError, match="cannot be asked"):
            reader.read("a\nb")
    finally:
        reader.close()


def test_a_tree_with_attributes_is_left_to_git_archive(
    space: HarnessSpace, edit: Callable[..., str], tmp_path: Path
) -> None:
    """Line endings, filters and export-ignore come from .gitattributes: such a tree is not extracted raw, and
    the space's snapshot of it is git archive's (here without the export-ignored file)."""
    sha = edit(space, space.baseline_commit(), {".gitattributes": "secret.txt export-ignore\n", "secret.txt": "s\n"})
    reader = ObjectReader(space.repo_dir)
    try:
        (tmp_path / "fast").mkdir()
        assert not reader.extract(space.tree_of(sha), tmp_path / "fast")
        assert list((tmp_path / "fast").iterdir()) == []
    finally:
        reader.close()
    snap = space.snapshot(sha, tmp_path / "snaps")
    assert (snap / ".gitattributes").is_file() and not (snap / "secret.txt").exists()


def test_the_space_reads_trees_and_files_without_a_process_each(
    space: HarnessSpace, odd_tree: str, tmp_path: Path, git_calls: list[list[str]]
) -> None:
    git_calls.clear()
    other = HarnessSpace(space.repo_dir, space.worktrees_dir)  # remembers nothing
    assert other.tree_of(odd_tree) == space.tree_of(odd_tree)
    assert other.read_file(odd_tree, "deep/er/est/x.txt") == "deep\n"
    assert other.read_file(odd_tree, "absent.txt") is None
    assert other.resolve(odd_tree[:12]) == odd_tree
    snap = other.snapshot(odd_tree, tmp_path / "snaps")
    assert (snap / "run.sh").is_file()
    # the space's own set-up (its git dir) and, once, whether attributes outside its trees apply; nothing per read
    assert [c[0] for c in git_calls] == ["rev-parse", "config"]
    other.close()


class _Interrupting:
    """A pipe end that raises KeyboardInterrupt (Ctrl-C) on its first read, then reads normally."""

    def __init__(self, pipe: Any) -> None:
        self.pipe, self.fired = pipe, False

    def _maybe(self) -> None:
        if not self.fired:
            self.fired = True
            raise KeyboardInterrupt

    def readline(self) -> bytes:
        line = self.pipe.readline()  # git has answered: the interrupt leaves the rest of the answer unread
        self._maybe()
        return line

    def read(self, n: int) -> bytes:
        self._maybe()
        return self.pipe.read(n)

    def close(self) -> None:
        self.pipe.close()


def test_an_interrupted_request_leaves_no_half_answer_for_the_next(space: HarnessSpace, odd_tree: str) -> None:
    """Ctrl-C between git's answer and its reading must not make the next request read the rest of that answer."""
    reader, writer = ObjectReader(space.repo_dir), RefWriter(space.repo_dir)
    try:
        for long_lived in (reader, writer):
            proc = long_lived._running()
            proc.stdout = _Interrupting(proc.stdout)  # type: ignore[assignment]
        with pytest.raises(KeyboardInterrupt):
            reader.read(f"{odd_tree}:deep/er/est/x.txt")
        found = reader.read(f"{odd_tree}:run.sh")
        assert found is not None and found[1:] == ("blob", b"#!/bin/sh\n")
        base = space.baseline_commit()
        with pytest.raises(KeyboardInterrupt):
            writer.update({"refs/test/first": base})
        writer.update({"refs/test/second": base})
        assert _rev(space.repo_dir, "refs/test/second") == base
    finally:
        reader.close()
        writer.close()


def test_extract_writes_whole_files_when_the_system_writes_less_than_asked(
    space: HarnessSpace, odd_tree: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`os.write` may write part of what it is given (a file size limit, a nearly full disk): nothing is cut."""
    from saddler.harness import gitbatch

    real_write = os.write
    monkeypatch.setattr(gitbatch.os, "write", lambda fd, data: real_write(fd, bytes(data[:100])))
    reader = ObjectReader(space.repo_dir)
    try:
        (tmp_path / "out").mkdir()
        assert reader.extract(space.tree_of(odd_tree), tmp_path / "out")
    finally:
        reader.close()
    assert (tmp_path / "out" / "blob.bin").read_bytes() == bytes(range(256)) * 10


def test_attributes_from_outside_the_trees_leave_snapshots_to_git_archive(
    space: HarnessSpace, edit: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's attributes (`~/.config/git/attributes`, `core.attributesFile`) apply to checkouts and archives:
    a snapshot then is what `git archive` writes (here CRLF line ends and an export-ignored file)."""
    sha = edit(space, space.baseline_commit(), {"notes.txt": "a\nb\n", "drop.txt": "x\n"})
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "attributes").write_text("notes.txt eol=crlf\ndrop.txt export-ignore\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    fresh = HarnessSpace(space.repo_dir, space.worktrees_dir)
    try:
        snap = fresh.snapshot(sha, tmp_path / "snaps")
    finally:
        fresh.close()
    assert (snap / "notes.txt").read_bytes() == b"a\r\nb\r\n" and not (snap / "drop.txt").exists()

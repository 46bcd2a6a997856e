"""`RefWriter`: ref updates through one long-lived `git update-ref --stdin`, on real temporary repositories."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from saddler.errors import HarnessError
from saddler.harness.gitbatch import RefWriter
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
        with pytest.raises(HarnessError, match=r"update-ref --stdin failed .* refs/test/bad.*invalid"):
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

"""A removed candidate worktree is parked and reused for the next one (a checkout instead of `git worktree add`):
whatever a session left in it (edits, staged and untracked files, ignored caches, its own commits and branches),
the next worktree is exactly the requested commit; one in the middle of a git operation is never reused."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from saddler.harness.space import HarnessSpace


@pytest.fixture
def space(tmp_path: Path, source_repo: Callable[..., Path]) -> HarnessSpace:
    source = source_repo(tmp_path / "user-harness")
    return HarnessSpace.create(source, tmp_path / "run" / "harness", tmp_path / "run" / "worktrees")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode & 0o777)
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def _registered(space: HarnessSpace) -> list[str]:
    out = _git(space.repo_dir, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")][1:]


def _candidate(space: HarnessSpace) -> str:
    wt = space.worktree(space.baseline_commit(), "make")
    (wt / "loop.py").write_text("# candidate\n")
    (wt / "added.txt").write_text("new file\n")
    sha = space.commit_worktree(wt, "candidate")
    space.remove_worktree(wt)
    assert sha is not None
    return sha


def _mess_up(wt: Path) -> None:
    """What a diagnosis session may leave: its own commit and branch, edits, staged, untracked and ignored files."""
    (wt / "loop.py").write_text("# the agent's own commit\n")
    _git(wt, "add", "-A")
    _git(wt, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "agent commit")
    _git(wt, "checkout", "-q", "-b", "agent-branch")
    (wt / "README.md").write_text("edited\n")
    (wt / "staged.txt").write_text("staged\n")
    _git(wt, "add", "staged.txt")
    (wt / "untracked.txt").write_text("untracked\n")
    (wt / "pkg" / "__pycache__").mkdir(parents=True)
    (wt / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    _git(wt, "update-index", "--skip-worktree", "tools/search.py")  # index flags git keeps through a checkout
    (wt / "tools" / "search.py").write_text("hidden edit\n")
    _git(wt, "update-index", "--assume-unchanged", "prompts/system.md")
    (wt / "prompts" / "system.md").write_text("unseen edit\n")
    (wt / "prompts" / "system.md").chmod(0o600)


def _used_and_removed(space: HarnessSpace) -> tuple[str, Path]:
    """A candidate commit, and a worktree of the baseline a session left messy and the loop then removed."""
    candidate = _candidate(space)
    first = space.worktree(space.baseline_commit(), "it1-a0")
    _mess_up(first)
    space.remove_worktree(first)
    return candidate, first


def test_the_next_worktree_reuses_a_removed_one_and_is_exactly_its_commit(
    space: HarnessSpace, tmp_path: Path, git_calls: list[list[str]]
) -> None:
    candidate, first = _used_and_removed(space)
    assert not first.exists()
    git_calls.clear()
    second = space.worktree(candidate, "it2-a0")
    assert not any(call[:2] == ["worktree", "add"] for call in git_calls), git_calls
    space.export_tree(candidate, tmp_path / "expected")
    assert _files(second) == _files(tmp_path / "expected")
    assert _git(second, "status", "--porcelain", "--ignored") == ""
    assert {line[:2] for line in _git(second, "ls-files", "-v").splitlines()} == {"H "}  # no flag left over
    admin = Path(_git(second, "rev-parse", "--absolute-git-dir").strip())
    assert not (admin / "ORIG_HEAD").exists() and not (admin / "COMMIT_EDITMSG").exists()
    assert _git(second, "rev-parse", "HEAD").strip() == candidate
    assert subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=second).returncode == 1  # detached
    assert _registered(space) == [str(second)]
    (second / "loop.py").write_text("# next candidate\n")
    sha = space.commit_worktree(second, "next")
    assert sha is not None and space.changed_files(candidate, sha) == ["loop.py"]


@pytest.mark.parametrize("state", ["MERGE_HEAD", "rebase-merge", "index.lock", "locked"])
def test_a_worktree_left_mid_operation_is_not_reused(
    space: HarnessSpace, state: str, git_calls: list[list[str]]
) -> None:
    first = space.worktree(space.baseline_commit(), "it1-a0")
    admin = Path(_git(first, "rev-parse", "--absolute-git-dir").strip())
    if state == "rebase-merge":
        (admin / state).mkdir()
    else:
        (admin / state).write_text("left by the session\n")
    space.remove_worktree(first)
    git_calls.clear()
    second = space.worktree(space.baseline_commit(), "it2-a0")
    assert [call[:2] for call in git_calls if call[0] == "worktree"] == [["worktree", "add"]]
    assert _git(second, "status", "--porcelain", "--ignored") == ""
    assert _registered(space) == [str(second)]


def test_a_damaged_parked_worktree_gives_way_to_a_fresh_one(space: HarnessSpace) -> None:
    first = space.worktree(space.baseline_commit(), "it1-a0")
    space.remove_worktree(first)
    parked = list(space.worktrees_dir.iterdir())
    assert len(parked) == 1
    (parked[0] / ".git").unlink()  # what `rm -rf .git` in the session's folder would do, found only at reuse
    second = space.worktree(space.baseline_commit(), "it2-a0")
    assert _git(second, "status", "--porcelain", "--ignored") == ""
    assert _registered(space) == [str(second)]


def test_prune_removes_the_parked_worktree(space: HarnessSpace) -> None:
    space.remove_worktree(space.worktree(space.baseline_commit(), "it1-a0"))
    space.prune()
    assert list(space.worktrees_dir.iterdir()) == []
    assert _registered(space) == []
    assert space.worktree(space.baseline_commit(), "it2-a0").is_dir()


def test_a_new_space_on_the_same_folders_does_not_trust_a_parked_worktree(space: HarnessSpace) -> None:
    """A parked worktree belongs to the process that parked it; another (a resumed run) prunes it first."""
    space.remove_worktree(space.worktree(space.baseline_commit(), "it1-a0"))
    again = HarnessSpace(space.repo_dir, space.worktrees_dir)
    again.prune()
    second = again.worktree(space.baseline_commit(), "it2-a0")
    assert _registered(again) == [str(second)]


def test_a_worktree_prepared_in_the_background_is_taken_without_git(
    space: HarnessSpace, tmp_path: Path, git_calls: list[list[str]]
) -> None:
    candidate, _ = _used_and_removed(space)
    space.prepare_worktree(candidate)
    space._spare.wait()  # the preparation ran while the caller did something else
    git_calls.clear()
    second = space.worktree(candidate, "it2-a0")
    assert git_calls == []
    space.export_tree(candidate, tmp_path / "expected")
    assert _files(second) == _files(tmp_path / "expected")
    assert _git(second, "status", "--porcelain", "--ignored") == ""
    assert _git(second, "rev-parse", "HEAD").strip() == candidate


def test_a_worktree_prepared_for_another_commit_is_checked_out_again(space: HarnessSpace, tmp_path: Path) -> None:
    candidate = _candidate(space)
    first = space.worktree(space.baseline_commit(), "it1-a0")
    space.remove_worktree(first)
    space.prepare_worktree(candidate)
    second = space.worktree(space.baseline_commit(), "it2-a0")  # not what was prepared
    space.export_tree(space.baseline_commit(), tmp_path / "expected")
    assert _files(second) == _files(tmp_path / "expected")
    assert _git(second, "rev-parse", "HEAD").strip() == space.baseline_commit()
    (second / "edit.txt").write_text("x\n")
    space.remove_worktree(second)
    space.prepare_worktree(candidate)
    space.prune()  # waits for the preparation, then deletes the kept worktree
    assert list(space.worktrees_dir.iterdir()) == []

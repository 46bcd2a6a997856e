"""apply_on_index (the private-index apply), cherry_pick and revert on real temporary repositories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from saddler.harness.plumbing import apply_on_index
from saddler.harness.space import HarnessSpace


@pytest.fixture
def space(tmp_path: Path, source_repo: Callable[..., Path]) -> HarnessSpace:
    source = source_repo(tmp_path / "user-harness")
    return HarnessSpace.create(source, tmp_path / "run" / "harness", tmp_path / "run" / "worktrees")


@pytest.fixture
def prompt(harness_files: dict[str, str]) -> str:
    """The demo harness's prompts/system.md."""
    return harness_files["prompts/system.md"]


def content(space: HarnessSpace, commit: str, path: str) -> str | None:
    return space.read_file(commit, path)


@pytest.fixture
def only_main_worktree(git_in: Callable[..., str]) -> Callable[[HarnessSpace], bool]:
    """`only_main_worktree(space)`: no worktree is left besides the clone itself (no cherry-pick or revert makes
    one)."""

    def check(space: HarnessSpace) -> bool:
        out = git_in("worktree", "list", "--porcelain", cwd=space.repo_dir)
        listed = [line for line in out.splitlines() if line.startswith("worktree ")]
        return len(listed) == 1

    return check


def apply(space: HarnessSpace, onto: str, patch: str) -> tuple[str | None, str]:
    """`patch` applied to `onto`'s tree on a private index (what cherry-pick and revert run on)."""
    return apply_on_index(space.repo_dir, space.git_dir, onto, patch)


def test_apply_on_index_clean(space: HarnessSpace, edit: Callable[..., str]) -> None:
    base = space.baseline_commit()
    new_search = "def search(q):\n    return [q, 'more']\n"
    child = edit(space, base, {"tools/search.py": new_search, "tools/new.py": "N = 1\n"})
    tree, error = apply(space, base, space.diff(base, child))
    assert tree is not None and error == ""
    assert content(space, tree, "tools/new.py") == "N = 1\n"
    assert tree == space.tree_of(child)


def test_apply_on_index_conflict_reports_file_and_leaves_worktrees_alone(
    space: HarnessSpace, git_in: Callable[..., str], edit: Callable[..., str], prompt: str
) -> None:
    base = space.baseline_commit()
    theirs = edit(space, base, {"prompts/system.md": prompt.replace("Answer briefly.", "Answer in detail.")})
    ours = edit(space, base, {"prompts/system.md": prompt.replace("Answer briefly.", "Answer in one word.")})
    wt = space.worktree(ours, "apply")
    tree, error = apply(space, ours, space.diff(base, theirs))
    assert tree is None
    assert error == "conflict in: prompts/system.md"
    assert git_in("status", "--porcelain", cwd=wt) == ""
    assert "one word" in (wt / "prompts" / "system.md").read_text()
    assert not list(space.git_dir.glob("saddler-index-*"))


def test_apply_on_index_garbage_and_empty(space: HarnessSpace, git_in: Callable[..., str]) -> None:
    base = space.baseline_commit()
    wt = space.worktree(base, "apply")
    empty, why = apply(space, base, "")
    assert empty is None and why.startswith("patch does not apply:")
    bad = "--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-old\n+new\n"
    tree, error = apply(space, base, bad)
    assert tree is None and error.startswith("patch does not apply:") and "nope.txt" in error
    assert git_in("status", "--porcelain", cwd=wt) == ""


def test_cherry_pick_clean_onto_other_branch(
    space: HarnessSpace,
    git_in: Callable[..., str],
    edit: Callable[..., str],
    only_main_worktree: Callable[[HarnessSpace], bool],
    prompt: str,
) -> None:
    base = space.baseline_commit()
    tool_fix = edit(space, base, {"tools/search.py": "def search(q):\n    return sorted([q])\n"})
    other = edit(space, base, {"prompts/system.md": prompt + "Cite sources.\n"})
    result = space.cherry_pick(other, base, tool_fix, "cherry-pick tool fix")
    assert result.ok and result.commit is not None
    assert content(space, result.commit, "tools/search.py") == "def search(q):\n    return sorted([q])\n"
    assert content(space, result.commit, "prompts/system.md") == prompt + "Cite sources.\n"
    assert git_in("rev-parse", f"{result.commit}^", cwd=space.repo_dir).strip() == other
    assert git_in("log", "-1", "--format=%s", result.commit, cwd=space.repo_dir).strip() == "cherry-pick tool fix"
    assert git_in("rev-parse", f"refs/saddler/c/{result.commit}", cwd=space.repo_dir).strip() == result.commit
    assert only_main_worktree(space)


def test_cherry_pick_merges_nearby_edits_three_way(space: HarnessSpace, edit: Callable[..., str], prompt: str) -> None:
    base = space.baseline_commit()
    top = edit(space, base, {"prompts/system.md": prompt.replace("You are a helpful agent.", "You are an ops agent.")})
    bottom = edit(space, base, {"prompts/system.md": prompt.replace("Check your work.", "Verify every step.")})
    result = space.cherry_pick(bottom, base, top, "pick")
    assert result.ok and result.commit is not None
    assert content(space, result.commit, "prompts/system.md") == (
        "You are an ops agent.\nAnswer briefly.\nVerify every step.\n"
    )


def test_cherry_pick_conflict_returns_the_file(
    space: HarnessSpace,
    git_in: Callable[..., str],
    edit: Callable[..., str],
    only_main_worktree: Callable[[HarnessSpace], bool],
    prompt: str,
) -> None:
    base = space.baseline_commit()
    a = edit(space, base, {"prompts/system.md": prompt.replace("Answer briefly.", "Answer A.")})
    b = edit(
        space,
        base,
        {
            "prompts/system.md": prompt.replace("Answer briefly.", "Answer B."),
            "loop.py": "def run(task):\n    return 2\n",
        },
    )
    refs_before = git_in("for-each-ref", "--format=%(refname)", cwd=space.repo_dir)
    result = space.cherry_pick(a, base, b, "pick")
    assert not result.ok and result.commit is None
    assert result.error == "cherry-pick: conflict in: prompts/system.md"
    assert git_in("for-each-ref", "--format=%(refname)", cwd=space.repo_dir) == refs_before
    assert only_main_worktree(space)
    assert list(space.worktrees_dir.iterdir()) == []


def test_cherry_pick_of_an_empty_or_contained_edge(space: HarnessSpace, edit: Callable[..., str]) -> None:
    base = space.baseline_commit()
    child = edit(space, base, {"loop.py": "def run(task):\n    return 3\n"})
    assert space.cherry_pick(child, base, base, "pick").error.endswith("changes nothing")
    again = space.cherry_pick(child, base, child, "pick")
    assert not again.ok and again.commit is None
    assert again.error == f"cherry-pick: nothing left to change on {child[:12]}"


def test_revert_restores_content(
    space: HarnessSpace,
    harness_files: dict[str, str],
    edit: Callable[..., str],
    only_main_worktree: Callable[[HarnessSpace], bool],
    prompt: str,
) -> None:
    base = space.baseline_commit()
    harmful = edit(space, base, {"tools/search.py": "def search(q):\n    return []\n", "tools/extra.py": "E = 1\n"})
    later = edit(space, harmful, {"prompts/system.md": prompt + "Be careful.\n"})
    result = space.revert(later, base, harmful, "revert harmful tool edit")
    assert result.ok and result.commit is not None
    assert content(space, result.commit, "tools/search.py") == harness_files["tools/search.py"]
    assert content(space, result.commit, "tools/extra.py") is None
    assert content(space, result.commit, "prompts/system.md") == prompt + "Be careful.\n"
    assert space.changed_files(later, result.commit) == ["tools/extra.py", "tools/search.py"]
    assert only_main_worktree(space)


def test_revert_conflict_when_the_line_moved_on(
    space: HarnessSpace, edit: Callable[..., str], only_main_worktree: Callable[[HarnessSpace], bool]
) -> None:
    base = space.baseline_commit()
    first = edit(space, base, {"loop.py": "def run(task):\n    return 1\n"})
    second = edit(space, first, {"loop.py": "def run(task):\n    return 2\n"})
    result = space.revert(second, base, first, "revert first")
    assert not result.ok
    assert result.error == "revert: conflict in: loop.py"
    assert only_main_worktree(space)


FILE_NAMES = ["loop.py", "tools/search.py", "tools/new.bin", "prompts/system.md", "notes/ünïcode.txt"]
CONTENT = st.one_of(
    st.none(),  # delete (or leave absent)
    st.binary(max_size=40),
    st.text(alphabet="ab\n\t é", max_size=40).map(lambda t: t.encode("utf-8")),
    st.just(b"\xff\xfe latin-1 \xe9\n"),
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(FILE_NAMES), CONTENT, min_size=1, max_size=4))
@example(change={"loop.py": b"\r"})  # a lone CR was turned into LF by text-mode pipes
@example(change={"prompts/system.md": b"line one\r\nline two\r\n"})
def test_diff_round_trips_through_pick_and_revert(space: HarnessSpace, change: dict[str, bytes | None]) -> None:
    base = space.baseline_commit()
    wt = space.worktree(base, "prop")
    for rel, data in change.items():
        path = wt / rel
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    child = space.commit_worktree(wt, "random change")
    space.remove_worktree(wt)
    if child is None:
        return
    again = space.cherry_pick(base, base, child, "pick")
    assert again.ok and again.commit is not None
    assert space.tree_of(again.commit) == space.tree_of(child)
    undone = space.revert(child, base, child, "revert")
    assert undone.ok and undone.commit is not None
    assert space.tree_of(undone.commit) == space.tree_of(base)
    tree, error = apply(space, base, space.diff(base, child))
    assert tree is not None and error == ""
    assert tree == space.tree_of(child)

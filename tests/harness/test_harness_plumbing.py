"""The harness space's git budget: what each operation costs in git processes, and that the plumbing (private index,
commit-tree) gives exactly the commits the porcelain (worktree, `git commit`) gave."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saddler.harness.plumbing import parse_numstat, stripspace
from saddler.harness.space import HarnessSpace

CLOCK = 946684800


@pytest.fixture
def space(tmp_path: Path, source_repo: Callable[..., Path]) -> HarnessSpace:
    return HarnessSpace.create(
        source_repo(tmp_path / "src"), tmp_path / "run" / "harness", tmp_path / "run" / "wt", clock=lambda: CLOCK
    )


def test_commit_costs_three_git_processes_and_nothing_when_unchanged(
    space: HarnessSpace, git_calls: list[list[str]], git_in: Callable[..., str]
) -> None:
    wt = space.worktree(space.baseline_commit(), "c1")
    git_calls.clear()
    assert space.commit_worktree(wt, "nothing") is None
    assert [c[0] for c in git_calls] == ["add", "write-tree"]  # the parent's tree: the long-lived reader
    (wt / "loop.py").write_text("changed\n")
    git_calls.clear()
    sha = space.commit_worktree(wt, "changed")
    assert [c[0] for c in git_calls] == ["add", "write-tree", "commit-tree"]  # refs: the long-lived update-ref
    assert sha is not None and git_in("rev-parse", "HEAD", cwd=wt).strip() == sha
    assert git_in("rev-parse", f"refs/saddler/c/{sha}", cwd=space.repo_dir).strip() == sha


def test_stat_of_a_pair_is_one_git_process(
    space: HarnessSpace, git_calls: list[list[str]], edit: Callable[..., str], git_in: Callable[..., str]
) -> None:
    base = space.baseline_commit()
    sha = edit(space, base, {"tools/search.py": "x = 1\n", "tools/new.py": "a\nb\n"})
    assert space.config.name == "demo"  # read once per space
    git_calls.clear()
    assert space.changed_files(base, sha) == ["tools/new.py", "tools/search.py"]
    assert space.numstat(base, sha) == (3, 2)
    assert space.check_change(base, sha) == []
    assert space.patch_kind(space.changed_files(base, sha)) == "capability"
    assert space.diff(base, sha) == space.diff(base, sha)
    assert [c[0] for c in git_calls] == ["diff"]  # one `git diff --numstat -p`: the stat and the text
    plain = git_in(
        "diff", "--no-color", "--no-ext-diff", "--no-renames", "--binary", "--full-index", base, sha, cwd=space.repo_dir
    )
    assert space.diff(base, sha) == plain
    git_calls.clear()
    assert space.tree_of(sha) == space.tree_of(sha) and space.resolve(sha) == sha
    assert space.baseline_commit() == base
    assert len(git_calls) <= 1  # the tree of a commit just made is known already


def test_cherry_pick_runs_on_a_private_index_without_a_worktree(
    space: HarnessSpace, git_calls: list[list[str]], edit: Callable[..., str]
) -> None:
    base = space.baseline_commit()
    tool = edit(space, base, {"tools/search.py": "def search(q):\n    return [q, q]\n"})
    other = edit(space, base, {"prompts/system.md": "Be brief.\n"})
    index_before = (space.git_dir / "index").read_bytes()
    worktrees_before = sorted(space.worktrees_dir.iterdir())  # the one `edit` left parked for reuse
    git_calls.clear()
    result = space.cherry_pick(other, base, tool, "pick")
    assert result.ok and result.commit is not None
    assert [c[0] for c in git_calls] == ["diff", "read-tree", "apply", "write-tree", "commit-tree"]
    assert not any(c[0] == "worktree" for c in git_calls)
    assert (space.git_dir / "index").read_bytes() == index_before  # the repository's own index is untouched
    assert not list(space.git_dir.glob("saddler-index-*"))
    assert sorted(space.worktrees_dir.iterdir()) == worktrees_before


def test_a_snapshot_costs_no_git_per_tree(tmp_path: Path, space: HarnessSpace, git_calls: list[list[str]]) -> None:
    base = space.baseline_commit()
    space.tree_of(base)
    git_calls.clear()
    first = space.snapshot(base, tmp_path / "snap")
    assert space.snapshot(base, tmp_path / "snap") == first  # once per tree
    # read through the space's long-lived git cat-file --batch; once per space: are there attributes outside trees
    assert [c[:2] for c in git_calls] == [["config", "--type=path"]]


MESSAGES = st.text(alphabet=" \t\nab#é\r", max_size=30).filter(lambda m: stripspace(m) != "")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=MESSAGES, content=st.text(alphabet="xy\n", min_size=1, max_size=10))
def test_commit_worktree_makes_the_commit_git_commit_makes(
    tmp_path_factory: pytest.TempPathFactory,
    message: str,
    content: str,
    harness_files: dict[str, str],
    source_repo: Callable[..., Path],
    git_in: Callable[..., str],
) -> None:
    root = tmp_path_factory.mktemp("same")
    space = HarnessSpace.create(source_repo(root / "src"), root / "harness", root / "wt", clock=lambda: CLOCK)
    base = space.baseline_commit()
    wt = space.worktree(base, "ours")
    (wt / "loop.py").write_text(harness_files["loop.py"] + content)
    ours = space.commit_worktree(wt, message)
    theirs_wt = space.worktree(base, "theirs")
    (theirs_wt / "loop.py").write_text(harness_files["loop.py"] + content)
    git_in("add", "-A", cwd=theirs_wt)
    env_date = f"{CLOCK} +0000"
    subprocess.run(
        ["git", "commit", "-q", "--no-verify", "-m", message],
        cwd=theirs_wt,
        check=True,
        capture_output=True,
        env={"GIT_AUTHOR_DATE": env_date, "GIT_COMMITTER_DATE": env_date, "PATH": "/usr/bin:/bin", "HOME": str(root)},
    )
    assert ours == git_in("rev-parse", "HEAD", cwd=theirs_wt).strip()


def test_a_staged_change_is_committed_without_staging_it_again(
    space: HarnessSpace,
    git_calls: list[list[str]],
    git_in: Callable[..., str],
    write_files: Callable[[Path, dict[str, str]], None],
) -> None:
    base = space.baseline_commit()
    space.tree_of(base)
    wt = space.worktree(base, "staged")
    write_files(wt, {"loop.py": "def run(task):\n    return [task]\n", "tools/new.py": "N = 1\n"})
    git_calls.clear()
    change = space.worktree_change(wt)
    assert [c[0] for c in git_calls] == ["add", "write-tree", "diff"]
    assert b"tools/new.py" in change.patch and change.tree == git_in("write-tree", cwd=wt).strip()
    git_calls.clear()
    sha = space.commit_worktree(wt, "staged", tree=change.tree)
    assert [c[0] for c in git_calls] == ["commit-tree"]
    again = space.worktree(base, "again")
    write_files(again, {"loop.py": "def run(task):\n    return [task]\n", "tools/new.py": "N = 1\n"})
    assert space.commit_worktree(again, "staged") == sha  # the commit staging it again would have made
    fresh = space.worktree(base, "replay")
    space.apply_change(fresh, change.patch)
    assert space.commit_worktree(fresh, "staged") == sha


def test_diff_and_stat_of_one_process_match_git_for_odd_and_binary_files(
    space: HarnessSpace,
    git_calls: list[list[str]],
    git_in: Callable[..., str],
    write_files: Callable[[Path, dict[str, str]], None],
) -> None:
    base = space.baseline_commit()
    wt = space.worktree(base, "odd")
    write_files(wt, {"name\twith tab.md": "a\nb\n", "ünï code.py": "x = 1\n", "prompts/system.md": "short\n"})
    (wt / "bin.dat").write_bytes(bytes(range(256)) * 4)
    (wt / "tools" / "search.py").unlink()
    sha = space.commit_worktree(wt, "odd")
    assert sha is not None
    git_calls.clear()
    text = space.diff(base, sha)
    stat = space.diff_stat(base, sha)
    assert len(git_calls) == 1
    plain = git_in(
        "diff", "--no-color", "--no-ext-diff", "--no-renames", "--binary", "--full-index", base, sha, cwd=space.repo_dir
    )
    assert text == plain and "GIT binary patch" in text
    assert stat == parse_numstat(git_in("diff", "--no-renames", "--numstat", "-z", base, sha, cwd=space.repo_dir))
    assert stat.files == sorted(["bin.dat", "name\twith tab.md", "prompts/system.md", "tools/search.py", "ünï code.py"])
    assert space.diff(sha, sha) == "" and space.changed_files(sha, sha) == []


def test_a_bundle_borrows_the_run_repositorys_objects_instead_of_pushing_them(
    tmp_path: Path,
    space: HarnessSpace,
    git_calls: list[list[str]],
    edit: Callable[..., str],
    git_in: Callable[..., str],
) -> None:
    sha = edit(space, space.baseline_commit(), {"tools/search.py": "x = 2\n"})
    git_calls.clear()
    space.bundle(sha, tmp_path / "out.bundle")
    assert [c[0] for c in git_calls] == ["init", "update-ref", "bundle"]  # no `push`: nothing is copied
    heads = git_in("bundle", "list-heads", str(tmp_path / "out.bundle"), cwd=tmp_path)
    assert heads == f"{sha} HEAD\n{sha} refs/heads/main\n"
    git_in("clone", "-q", str(tmp_path / "out.bundle"), str(tmp_path / "clone"), cwd=tmp_path)
    assert git_in("rev-parse", "HEAD", cwd=tmp_path / "clone").strip() == sha
    assert git_in("branch", "--show-current", cwd=tmp_path / "clone").strip() == "main"
    assert (tmp_path / "clone" / "tools" / "search.py").read_text() == "x = 2\n"


def test_parse_numstat_counts_binary_as_zero_and_keeps_odd_paths() -> None:
    out = "3\t1\ta.py\0-\t-\tbin/x.png\0" + "0\t0\tname\twith tab\0"
    stat = parse_numstat(out)
    assert stat.files == ["a.py", "bin/x.png", "name\twith tab"]
    assert (stat.added, stat.removed) == (3, 1)


def test_a_removed_worktree_is_gone_with_its_registration(space: HarnessSpace, git_in: Callable[..., str]) -> None:
    kept = space.worktree(space.baseline_commit(), "kept")
    wt = space.worktree(space.baseline_commit(), "gone")
    space.remove_worktree(wt)
    assert not wt.exists() and "gone" not in git_in("worktree", "list", cwd=space.repo_dir)
    assert kept.is_dir()
    space.prune()
    assert list(space.worktrees_dir.iterdir()) == [] and "kept" not in git_in("worktree", "list", cwd=space.repo_dir)

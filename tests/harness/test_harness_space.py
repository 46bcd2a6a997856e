"""HarnessSpace on real temporary git repositories: creation, worktrees, commits, diffs, export."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from saddler.errors import HarnessError
from saddler.harness.space import BASELINE_REF, HarnessSpace


@pytest.fixture
def source(tmp_path: Path, source_repo: Callable[..., Path]) -> Path:
    return source_repo(tmp_path / "user-harness")


@pytest.fixture
def space(tmp_path: Path, source: Path) -> HarnessSpace:
    return HarnessSpace.create(source, tmp_path / "run" / "harness", tmp_path / "run" / "worktrees")


def test_clone_leaves_the_source_untouched(
    tmp_path: Path,
    source: Path,
    harness_files: dict[str, str],
    git_in: Callable[..., str],
    repo_snapshot: Callable[[Path], dict[str, str]],
) -> None:
    (source / "loop.py").write_text("# uncommitted edit\n")
    (source / "scratch.txt").write_text("untracked\n")
    before = repo_snapshot(source)
    space = HarnessSpace.create(source, tmp_path / "run" / "harness", tmp_path / "run" / "wt")
    wt = space.worktree(space.baseline_commit(), "c1")
    (wt / "loop.py").write_text("def run(task):\n    return None\n")
    space.commit_worktree(wt, "candidate")
    space.prune()
    assert repo_snapshot(source) == before
    assert space.baseline_commit() == git_in("rev-parse", "HEAD", cwd=source).strip()
    baseline_loop = space.read_file(space.baseline_commit(), "loop.py")
    assert baseline_loop == harness_files["loop.py"]


def test_clone_is_configured_for_long_runs(space: HarnessSpace, git_in: Callable[..., str]) -> None:
    repo = space.repo_dir
    assert git_in("config", "--local", "user.name", cwd=repo).strip() == "saddler"
    assert git_in("config", "gc.auto", cwd=repo).strip() == "0"
    assert git_in("remote", cwd=repo).strip() == ""
    base = space.baseline_commit()
    refs = git_in("for-each-ref", "--format=%(refname)", "refs/saddler", cwd=repo).split()
    assert refs == [BASELINE_REF, f"refs/saddler/c/{base}"]
    assert space.config.name == "demo"


def test_create_from_plain_folder_commits_a_baseline(
    tmp_path: Path,
    harness_files: dict[str, str],
    git_in: Callable[..., str],
    write_files: Callable[[Path, dict[str, str]], None],
) -> None:
    template = tmp_path / "template"
    write_files(template, {**harness_files, "__pycache__/x.pyc": "junk", "tools/__pycache__/y.pyc": "junk"})
    space = HarnessSpace.create(template, tmp_path / "h", tmp_path / "wt")
    base = space.baseline_commit()
    tracked = git_in("ls-tree", "-r", "--name-only", base, cwd=space.repo_dir).split()
    assert tracked == sorted(harness_files)
    assert sorted(p.name for p in template.iterdir()) == [
        "__pycache__",
        "evals",
        "loop.py",
        "prompts",
        "saddler.toml",
        "skills",
        "tools",
    ]
    assert not (template / ".git").exists()


def test_subfolder_of_a_repo_is_copied_not_cloned(
    tmp_path: Path, source_repo: Callable[..., Path], git_in: Callable[..., str]
) -> None:
    outer = source_repo(tmp_path / "outer", {"README": "outer\n", "tpl/loop.py": "x = 1\n"})
    space = HarnessSpace.create(outer / "tpl", tmp_path / "h", tmp_path / "wt")
    tracked = git_in("ls-tree", "-r", "--name-only", space.baseline_commit(), cwd=space.repo_dir).split()
    assert tracked == ["loop.py"]


def test_bare_repo_and_linked_worktree_sources_are_cloned(
    tmp_path: Path,
    source: Path,
    git_in: Callable[..., str],
    write_files: Callable[[Path, dict[str, str]], None],
    repo_snapshot: Callable[[Path], dict[str, str]],
) -> None:
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(bare)], check=True)
    from_bare = HarnessSpace.create(bare, tmp_path / "h1", tmp_path / "wt1")
    assert from_bare.baseline_commit() == git_in("rev-parse", "HEAD", cwd=source).strip()
    git_in("worktree", "add", "-q", "-b", "feature", str(tmp_path / "linked"), cwd=source)
    write_files(tmp_path / "linked", {"loop.py": "feature = 1\n"})
    git_in("commit", "-q", "-am", "feature", cwd=tmp_path / "linked")
    before = repo_snapshot(source)
    from_linked = HarnessSpace.create(tmp_path / "linked", tmp_path / "h2", tmp_path / "wt2")
    assert from_linked.baseline_commit() == git_in("rev-parse", "feature", cwd=source).strip()
    assert from_linked.read_file(from_linked.baseline_commit(), "loop.py") == "feature = 1\n"
    assert repo_snapshot(source) == before


def test_same_clock_gives_same_shas(
    tmp_path: Path,
    harness_files: dict[str, str],
    write_files: Callable[[Path, dict[str, str]], None],
    edit: Callable[..., str],
) -> None:
    template = tmp_path / "template"
    write_files(template, harness_files)
    shas = []
    for run in ("a", "b"):
        space = HarnessSpace.create(template, tmp_path / run / "h", tmp_path / run / "wt", clock=lambda: 1_700_000_000)
        shas.append((space.baseline_commit(), edit(space, space.baseline_commit(), {"loop.py": "y = 2\n"})))
    assert shas[0] == shas[1]


def test_create_refuses_bad_sources(tmp_path: Path, source: Path, git_in: Callable[..., str]) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    with pytest.raises(HarnessError, match="not empty"):
        HarnessSpace.create(source, tmp_path / "busy", tmp_path / "wt")
    empty = tmp_path / "empty-repo"
    empty.mkdir()
    git_in("init", "-q", cwd=empty)
    with pytest.raises(HarnessError, match="has no commits"):
        HarnessSpace.create(empty, tmp_path / "h", tmp_path / "wt")
    with pytest.raises(HarnessError, match="is not a folder"):
        HarnessSpace.create(tmp_path / "missing", tmp_path / "h2", tmp_path / "wt")
    with pytest.raises(HarnessError, match="is not a harness repository"):
        HarnessSpace(tmp_path / "busy", tmp_path / "wt")


def test_reopen_existing_space(tmp_path: Path, space: HarnessSpace) -> None:
    again = HarnessSpace(space.repo_dir, space.worktrees_dir)
    assert again.baseline_commit() == space.baseline_commit()


def test_commit_worktree_and_diffs(space: HarnessSpace, git_in: Callable[..., str]) -> None:
    base = space.baseline_commit()
    wt = space.worktree(base, "c1")
    assert space.commit_worktree(wt, "nothing") is None
    (wt / "tools" / "search.py").write_text("def search(q):\n    return [q, q]\n")
    (wt / "tools" / "new.py").write_text("A = 1\nB = 2\n")
    (wt / "__pycache__").mkdir()
    (wt / "__pycache__" / "loop.cpython-311.pyc").write_bytes(b"\0\1")
    (wt / "prompts" / "system.md").unlink()
    sha = space.commit_worktree(wt, "candidate")
    assert sha is not None and len(sha) == 40
    assert git_in("rev-parse", f"refs/saddler/c/{sha}", cwd=space.repo_dir).strip() == sha
    assert space.changed_files(base, sha) == ["prompts/system.md", "tools/new.py", "tools/search.py"]
    assert space.numstat(base, sha) == (3, 4)
    text = space.diff(base, sha)
    assert "+++ b/tools/new.py" in text and "-Answer briefly." in text
    assert space.tree_of(sha) == git_in("rev-parse", f"{sha}^{{tree}}", cwd=space.repo_dir).strip()
    assert space.tree_of(base) != space.tree_of(sha)


def test_check_change_names_protected_paths(space: HarnessSpace, edit: Callable[..., str]) -> None:
    base = space.baseline_commit()
    assert space.check_change(base, base) == ["empty change: the candidate is identical to its parent"]
    bad = edit(space, base, {"saddler.toml": "[harness]\nname = 'x'\n", "evals/grade.py": "x = 0\n", "loop.py": "y\n"})
    assert space.check_change(base, bad) == [
        "protected path touched: evals/grade.py",
        "protected path touched: saddler.toml",
    ]
    good = edit(space, base, {"tools/search.py": "z = 1\n"})
    assert space.check_change(base, good) == []
    assert space.patch_kind(space.changed_files(base, good)) == "capability"


def test_worktree_replaces_a_stale_one(
    space: HarnessSpace, harness_files: dict[str, str], git_in: Callable[..., str]
) -> None:
    base = space.baseline_commit()
    wt = space.worktree(base, "diag")
    (wt / "junk.txt").write_text("left over by a crashed session")
    (wt / "loop.py").write_text("broken(")
    again = space.worktree(base, "diag")
    assert again == wt
    assert not (wt / "junk.txt").exists()
    assert (wt / "loop.py").read_text() == harness_files["loop.py"]
    assert git_in("status", "--porcelain", cwd=wt) == ""


@pytest.fixture
def registered(git_in: Callable[..., str]) -> Callable[[HarnessSpace], list[str]]:
    """`registered(space)`: the worktrees git has registered besides the clone itself."""

    def listing(space: HarnessSpace) -> list[str]:
        out = git_in("worktree", "list", "--porcelain", cwd=space.repo_dir)
        return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")][1:]

    return listing


def test_worktree_and_prune_after_simulated_crash(
    space: HarnessSpace, registered: Callable[[HarnessSpace], list[str]]
) -> None:
    base = space.baseline_commit()
    for name in ("a", "b", "c"):
        space.worktree(base, name)
    admin = space.git_dir / "worktrees"
    # a crash: folder "a" deleted while its admin entry is locked; "b" keeps a stale index.lock
    (admin / "a" / "locked").write_text("initializing")
    subprocess.run(["rm", "-rf", str(space.worktrees_dir / "a")], check=True)
    (admin / "b" / "index.lock").write_text("")
    again = space.worktree(base, "a")
    (again / "loop.py").write_text("x = 1\n")
    assert space.commit_worktree(again, "after crash") is not None
    b = space.worktree(base, "b")
    (b / "loop.py").write_text("x = 2\n")
    assert space.commit_worktree(b, "after stale lock") is not None
    (admin / "c" / "locked").write_text("initializing")
    (admin / "c" / "index.lock").write_text("")
    space.prune()
    assert list(space.worktrees_dir.iterdir()) == []
    assert registered(space) == []
    assert not admin.exists() or list(admin.iterdir()) == []
    assert space.worktree(base, "c").is_dir()


def test_worktree_rejects_bad_names_and_commits(space: HarnessSpace) -> None:
    with pytest.raises(HarnessError, match="one path segment"):
        space.worktree(space.baseline_commit(), "../escape")
    with pytest.raises(HarnessError, match="is not a commit"):
        space.worktree("0" * 40, "x")


def test_snapshot_is_made_once_per_tree_and_is_never_a_worktree(
    tmp_path: Path,
    space: HarnessSpace,
    harness_files: dict[str, str],
    git_in: Callable[..., str],
    registered: Callable[[HarnessSpace], list[str]],
) -> None:
    base = space.baseline_commit()
    root = tmp_path / "snapshots"
    with ThreadPoolExecutor(max_workers=4) as pool:
        paths = list(pool.map(lambda _: space.snapshot(base, root), range(8)))
    assert len(set(paths)) == 1
    path = paths[0]
    assert path == root / space.tree_of(base)
    assert sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()) == sorted(harness_files)
    assert not (path / ".git").exists() and registered(space) == []
    assert [p.name for p in root.iterdir()] == [path.name]  # no half-built folder left beside it
    same_tree = git_in("commit-tree", space.tree_of(base), "-p", base, "-m", "same files", cwd=space.repo_dir).strip()
    assert space.snapshot(same_tree, root) == path


def test_snapshot_of_a_missing_commit_is_refused(tmp_path: Path, space: HarnessSpace) -> None:
    with pytest.raises(HarnessError, match="is not a commit"):
        space.snapshot("0" * 40, tmp_path / "snapshots")
    assert not (tmp_path / "snapshots").exists()


def test_export_tree_and_bundle(
    tmp_path: Path,
    space: HarnessSpace,
    harness_files: dict[str, str],
    git_in: Callable[..., str],
    edit: Callable[..., str],
) -> None:
    base = space.baseline_commit()
    sha = edit(space, base, {"tools/search.py": "best = True\n"})
    out = tmp_path / "export"
    space.export_tree(sha, out)
    exported = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert exported == sorted(harness_files)
    assert (out / "tools" / "search.py").read_text() == "best = True\n"
    with pytest.raises(HarnessError, match="not empty"):
        space.export_tree(sha, out)
    bundle = tmp_path / "best.bundle"
    space.bundle(sha, bundle)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(bundle), str(clone)], check=True, capture_output=True)
    assert git_in("rev-parse", "HEAD", cwd=clone).strip() == sha
    assert git_in("symbolic-ref", "HEAD", cwd=clone).strip() == "refs/heads/main"
    assert git_in("rev-list", "--count", "HEAD", cwd=clone).strip() == "2"
    assert (clone / "tools" / "search.py").read_text() == "best = True\n"


def test_the_staged_change_is_the_commits_diff_without_asking_git_again(
    space: HarnessSpace, git_in: Callable[..., str], git_calls: list[list[str]]
) -> None:
    """`worktree_change` then `commit_worktree(tree=)`: the diff and stat of parent -> commit are the staged ones,
    byte for byte what `git diff` prints for the pair (added, deleted, binary, mode, CRLF and non-UTF-8 lines)."""
    base = space.baseline_commit()
    wt = space.worktree(base, "c1")
    (wt / "loop.py").write_bytes(b"def run(task):\r\n    return '\xff caf\xc3\xa9'\r\n")
    (wt / "skills" / "demo" / "SKILL.md").unlink()
    (wt / "logo.bin").write_bytes(bytes(range(256)))
    (wt / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (wt / "run.sh").chmod(0o755)
    staged = space.worktree_change(wt)
    sha = space.commit_worktree(wt, "rich change", tree=staged.tree)
    assert sha is not None and staged.head == base
    git_calls.clear()
    text, stat = space.diff(base, sha), space.diff_stat(base, sha)
    assert git_calls == []
    fresh = HarnessSpace(space.repo_dir, space.worktrees_dir)  # remembers nothing: asks git
    assert fresh.diff(base, sha) == text and fresh.diff_stat(base, sha) == stat
    assert staged.patch == text.encode("utf-8", "surrogateescape")
    assert stat.files == ["logo.bin", "loop.py", "run.sh", "skills/demo/SKILL.md"]
    assert "GIT binary patch" in text and "new file mode 100755" in text


def test_diffs_do_not_depend_on_where_they_are_asked(space: HarnessSpace, write_files: Callable[..., None]) -> None:
    """The staged diff is taken in the session's worktree and a remembered one is asked again in the clone after a
    resume: .gitattributes in either (here `-diff`, making text look binary) must not change the answer, or a
    resumed run would rank nodes by other line counts than the run it continues."""
    base = space.baseline_commit()
    wt = space.worktree(base, "c1")
    write_files(wt, {".gitattributes": "*.md -diff\n", "prompts/system.md": "one\ntwo\nthree\n"})
    staged = space.worktree_change(wt)
    sha = space.commit_worktree(wt, "attributes", tree=staged.tree)
    assert sha is not None
    fresh = HarnessSpace(space.repo_dir, space.worktrees_dir)
    for a in (base,):
        assert fresh.diff_stat(a, sha) == space.diff_stat(a, sha)
        assert fresh.diff(a, sha) == space.diff(a, sha)
    assert space.numstat(base, sha) == (4, 3)  # text lines, whatever the attributes say
    assert "GIT binary patch" not in space.diff(base, sha)
    index_lines = [line for line in space.diff(base, sha).splitlines() if line.startswith("index ")]
    assert index_lines and all(len(line.split()[1]) == 2 * 40 + 2 for line in index_lines)  # full shas

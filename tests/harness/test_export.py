"""export_harness against a real harness repository (HarnessSpace) and the fixture run pointing at its commits."""

from __future__ import annotations

import errno
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gitrepo import git

from evodag.store import EvoDAG
from saddler.errors import DiskFullError, HarnessError
from saddler.harness.export import export_harness
from saddler.harness.space import HarnessSpace
from saddler.scoring import node_score

TOML = '[harness]\nname = "demo"\n\n[harness.components]\ncapability = ["tools/**"]\nsteering = ["prompts/**"]\n'


def tree_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def commit_files(repo: Path, commit: str) -> dict[str, bytes]:
    names = git(repo, "ls-tree", "-r", "--name-only", commit).split()
    return {
        n: subprocess.run(["git", "show", f"{commit}:{n}"], cwd=repo, check=True, capture_output=True).stdout
        for n in names
    }


def _edit(space: HarnessSpace, parent: str, name: str, files: dict[str, str]) -> str:
    wt = space.worktree(parent, name)
    for rel, text in files.items():
        (wt / rel).parent.mkdir(parents=True, exist_ok=True)
        (wt / rel).write_text(text)
    sha = space.commit_worktree(wt, name)
    space.remove_worktree(wt)
    assert sha is not None
    return sha


@pytest.fixture(scope="module")
def exported(
    tmp_path_factory: pytest.TempPathFactory, build_run: Callable[..., Any], open_store: Callable[[Any], Any]
) -> tuple[HarnessSpace, EvoDAG, dict[str, int], dict[str, str]]:
    root = tmp_path_factory.mktemp("export")
    src = root / "template"
    (src / "tools").mkdir(parents=True)
    (src / "prompts").mkdir()
    (src / "saddler.toml").write_text(TOML)
    (src / "tools" / "tickets.py").write_text("def list_tickets(api):\n    return api.page(0)\n")
    (src / "prompts" / "system.md").write_text("You are the ops desk agent.\n")
    space = HarnessSpace.create(src, root / "repo", root / "worktrees", clock=lambda: 1_700_000_000)
    base = space.baseline_commit()
    n2 = _edit(space, base, "n2", {"tools/tickets.py": "def list_tickets(api):\n    return api.all_pages()\n"})
    n7 = _edit(space, n2, "n7", {"prompts/reminders.md": "Verify the final state before finishing.\n"})
    store, clock = open_store(root / "evodag.db")
    fx = build_run(store, clock, commits={"N1": base, "N2": n2, "N7": n7})
    return space, store, fx.ids, fx.commits


def test_export_of_the_best_node(
    exported: tuple[HarnessSpace, EvoDAG, dict[str, int], dict[str, str]], tmp_path: Path
) -> None:
    space, store, ids, commits = exported
    dest = tmp_path / "best"
    info = export_harness(space, store, ids["N7"], dest)
    assert info == {
        "run_id": store.get_run().id, "node_id": ids["N7"], "commit": commits["N7"], "baseline_commit": commits["N1"],
        "status": "accepted", "lineage": [ids["N1"], ids["N2"], ids["N7"]], "dev_mean": 1.0, "dev_std": 0.0,
        "test_mean": 0.916667, "test_std": 0.117851, "test_runs": 3,
        "files_changed": ["prompts/reminders.md", "tools/tickets.py"], "lines_added": 2, "lines_removed": 1,
        "harness_dir": "harness", "patch": f"demo-node{ids['N7']}.patch", "bundle": f"demo-node{ids['N7']}.bundle",
    }  # fmt: skip
    assert json.loads((dest / "EXPORT.json").read_text()) == info
    assert sorted(p.name for p in dest.iterdir()) == sorted(["EXPORT.json", "harness", info["patch"], info["bundle"]])

    # the tree is exactly the commit's content, without .git
    assert tree_files(dest / "harness") == commit_files(space.repo_dir, commits["N7"])
    assert not (dest / "harness" / ".git").exists()

    # the patch turns the baseline's files into the node's
    base_tree = tmp_path / "base"
    space.export_tree(commits["N1"], base_tree)
    git(base_tree, "apply", str(dest / info["patch"]))
    assert tree_files(base_tree) == tree_files(dest / "harness")

    # the bundle clones, and its HEAD is the node's commit
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(dest / info["bundle"]), str(clone))
    assert git(clone, "rev-parse", "HEAD").strip() == commits["N7"]
    assert {k: v for k, v in tree_files(clone).items() if not k.startswith(".git/")} == tree_files(dest / "harness")


def test_reexport_replaces_a_previous_export_and_refuses_foreign_folders(
    exported: tuple[HarnessSpace, EvoDAG, dict[str, int], dict[str, str]], tmp_path: Path
) -> None:
    space, store, ids, commits = exported
    dest = tmp_path / "out"
    export_harness(space, store, ids["N7"], dest, name="mine")
    info = export_harness(space, store, ids["N2"], dest, name="mine")
    assert (info["commit"], info["lineage"], info["test_runs"], info["test_mean"]) == (
        commits["N2"],
        [ids["N1"], ids["N2"]],
        0,
        None,
    )
    assert tree_files(dest / "harness") == commit_files(space.repo_dir, commits["N2"])
    assert (dest / "mine.patch").read_text() == space.diff(commits["N1"], commits["N2"])

    foreign = tmp_path / "foreign"
    (foreign / "harness").mkdir(parents=True)
    (foreign / "harness" / "keep.txt").write_text("user data")
    with pytest.raises(HarnessError, match="not a saddler export"):
        export_harness(space, store, ids["N7"], foreign)
    assert (foreign / "harness" / "keep.txt").read_text() == "user data"


def test_reexporting_another_node_leaves_only_that_nodes_files(
    exported: tuple[HarnessSpace, EvoDAG, dict[str, int], dict[str, str]], tmp_path: Path
) -> None:
    space, store, ids, commits = exported
    dest = tmp_path / "best"
    first = export_harness(space, store, ids["N7"], dest)
    (dest / "notes.txt").write_text("the user's own file")
    second = export_harness(space, store, ids["N2"], dest)
    assert first["patch"] != second["patch"]
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        ["EXPORT.json", "harness", second["patch"], second["bundle"], "notes.txt"]
    )
    assert tree_files(dest / "harness") == commit_files(space.repo_dir, commits["N2"])


def test_an_export_interrupted_by_a_full_disk_leaves_the_previous_one_and_can_be_redone(
    exported: tuple[HarnessSpace, EvoDAG, dict[str, int], dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    space, store, ids, _commits = exported
    dest = tmp_path / "best"
    before = export_harness(space, store, ids["N7"], dest)
    snapshot = tree_files(dest)

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(HarnessSpace, "bundle", full)
    with pytest.raises(DiskFullError, match=r"disk full: the export could not write to .*best"):
        export_harness(space, store, ids["N2"], dest)
    assert tree_files(dest) == snapshot and json.loads((dest / "EXPORT.json").read_text()) == before
    monkeypatch.undo()
    after = export_harness(space, store, ids["N2"], dest)
    assert sorted(p.name for p in dest.iterdir()) == sorted(["EXPORT.json", "harness", after["patch"], after["bundle"]])


@pytest.mark.parametrize(
    ("config", "inputs"),
    [
        ({"policies": {"score": "mean_score"}}, {"policies.score": "mean_score"}),  # as a run records it
        ({"policies": {"score": "mean_score"}}, None),  # a run recorded before its inputs were kept
        ({"policies": {"score": "pass_rate"}}, {"policies.score": "mean_score"}),  # changed, allowed: inputs say
    ],
)
def test_the_export_scores_the_test_split_by_the_runs_score_kind(
    exported: tuple[HarnessSpace, EvoDAG, dict[str, int], dict[str, str]],
    open_store: Callable[[Any], Any],
    graded_baseline: Callable[..., Any],
    tmp_path: Path,
    config: dict[str, Any],
    inputs: dict[str, Any] | None,
) -> None:
    space, _store, _ids, commits = exported
    store, _clock = open_store(tmp_path / "evodag.db")
    node = graded_baseline(store, config, inputs, commits["N1"])
    rows = store.rollouts(node.run_id, node_id=node.id, split="test")
    score = node_score(rows, "mean_score")  # what the run stores as the node's test score (finish.evaluate_test)
    node = store.update_node(node.id, test_mean=score.mean, test_std=score.std)
    info = export_harness(space, store, node.id, tmp_path / "best")
    assert (info["test_mean"], info["test_std"], info["test_runs"]) == (0.6875, 0.0625, 2)
    assert (info["test_mean"], info["test_std"]) == (node.test_mean, node.test_std)

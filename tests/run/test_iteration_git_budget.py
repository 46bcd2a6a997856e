"""What one diagnosis attempt of the loop spends in git processes (the demo's orchestration overhead is mostly
these): counted through a wrapper of `subprocess.run`, on a real opsdesk run folder with the offline backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evodag.models import Node
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.harness.diffs import _DIFF_ARGS, _STAT_ARGS
from saddler.reporting.progress import NullProgress
from saddler.run import diagnosis
from saddler.run.context import RunContext, open_context
from saddler.run.folder import RunPaths
from saddler.run.loop import Optimizer


@pytest.fixture
def ctx(tmp_path: Path, make_run: Callable[..., Path]) -> Iterator[RunContext]:
    run = make_run(tmp_path / "run")
    paths = RunPaths(run)
    with EvoDAG(paths.db) as store:
        ctx = open_context(paths, load_run_config(run), store, NullProgress())
        try:
            yield ctx
        finally:
            ctx.executor.close()
            ctx.space.prune()


def _patch(ctx: RunContext, number: int, parent: Node) -> Node:
    """One exploring diagnosis (the offline backend applies an untried bank patch without symptoms) on `parent`."""
    it = ctx.store.start_iteration(ctx.run_id, number, 0, [], phase="capability", exploration=True)
    node = diagnosis.patch(ctx, it, parent, [], lambda _text: None)
    assert node is not None and node.status == "pending"
    return node


def test_a_patched_attempt_spends_seven_git_processes(ctx: RunContext, git_calls: list[list[str]]) -> None:
    baseline = Optimizer._baseline_node(ctx)
    first = _patch(ctx, 1, baseline)
    assert ctx.space.tree_of(first.commit)  # known since the commit: no git
    git_calls.clear()
    second = _patch(ctx, 2, first)
    calls = [c[0] for c in git_calls]
    assert calls[:4] == [
        "worktree",  # the attempt's worktree, added at the parent
        "apply",  # the offline session's edit
        "add", "write-tree",  # the session's change, staged
    ]  # fmt: skip
    # side by side: parent -> staged (the change stored for a resume, the edge's diff, changed files and lines) and
    # baseline -> staged (the node's lines changed)
    tree = ctx.space.tree_of(second.commit)
    assert sorted(map(tuple, git_calls[4:6])) == sorted(
        [("diff", *_DIFF_ARGS, first.commit, tree), ("diff", *_STAT_ARGS, ctx.space.baseline_commit(), tree)]
    )
    assert calls[6:] == ["commit-tree"]  # the candidate commit (not staged again); its refs: the long-lived update-ref
    assert ctx.store.edge_into(second.id) is not None
    assert ctx.space.diff(first.commit, second.commit) == ctx.store.get_blob(ctx.store.edge_into(second.id).diff_sha)


def test_the_first_attempt_on_the_baseline_needs_one_diff_less(ctx: RunContext, git_calls: list[list[str]]) -> None:
    baseline = Optimizer._baseline_node(ctx)
    assert ctx.space.config.name  # read once per run
    ctx.space.tree_of(baseline.commit)  # the evaluation before the diagnosis asked for it
    git_calls.clear()
    _patch(ctx, 1, baseline)
    assert [c[0] for c in git_calls].count("diff") == 1  # parent and baseline are one commit: the staged diff
    assert [c[0] for c in git_calls][:1] == ["worktree"]  # the run's first worktree is added
    assert len(git_calls) == 6

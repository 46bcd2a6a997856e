"""Work made ahead on the loop's low-priority thread: the diagnosis worktree of the parent, made while the parent's
batch is evaluated (`saddler.run.ahead`)."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from harness_fixtures import make_source_repo, sh

from saddler.errors import HarnessError
from saddler.harness.space import HarnessSpace
from saddler.run.ahead import Ahead


@pytest.fixture
def space(tmp_path: Path) -> HarnessSpace:
    return HarnessSpace.create(make_source_repo(tmp_path / "src"), tmp_path / "run" / "harness", tmp_path / "wt")


@pytest.fixture
def ahead() -> Any:
    worker = Ahead()
    yield worker
    worker.close()


def test_the_worktree_is_made_on_a_low_priority_thread_and_taken_whole(
    space: HarnessSpace, ahead: Ahead, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, int]] = []
    real = subprocess.run

    def recording(args: Any, *rest: Any, **kwargs: Any) -> Any:
        if isinstance(args, list) and args[:2] == ["git", "worktree"]:
            seen.append((threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, 0)))  # this thread's nice
        return real(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "run", recording)
    base = space.baseline_commit()
    prepared = ahead.worktree(space, base, "it1-a0")
    path = prepared.take()
    assert path == space.worktrees_dir / "it1-a0" and (path / "loop.py").is_file()
    assert sh("rev-parse", "HEAD", cwd=path).strip() == base
    assert sh("status", "--porcelain", cwd=path) == ""
    assert len(seen) == 1 and seen[0][0].startswith("saddler-ahead") and seen[0][1] == 19
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0  # the calling thread keeps its priority
    prepared.discard()  # taken: the caller owns it now
    assert path.is_dir()


def test_an_unused_worktree_is_removed(space: HarnessSpace, ahead: Ahead) -> None:
    prepared = ahead.worktree(space, space.baseline_commit(), "it2-a0")
    prepared.discard()
    assert not (space.worktrees_dir / "it2-a0").exists()
    assert "it2-a0" not in sh("worktree", "list", cwd=space.repo_dir)


def test_a_failure_surfaces_where_the_work_is_taken_and_is_dropped_when_unused(
    space: HarnessSpace, ahead: Ahead
) -> None:
    with pytest.raises(HarnessError, match="is not a commit"):
        ahead.worktree(space, "no-such-commit", "it3-a0").take()
    ahead.worktree(space, "no-such-commit", "it4-a0").discard()  # nobody needed it: nothing to say

"""Fixtures for end-to-end loop tests on opsdesk: small seeded run folders, and what two runs must share."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from gitrepo import git_run

from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.reporting.progress import make_progress
from saddler.run.context import RunContext, open_context
from saddler.run.folder import RunPaths, init_run

SMALL: dict[str, Any] = {
    "loop": {"max_iterations": 6, "batch_size": 6, "test_runs": 2, "parallel_iterations": 1},
    "executor": {"workers": 2},
}
"""The small run every loop test starts from: 6 iterations, batches of 6, 2 test runs, 2 workers, one iteration at a
time — the loop's own properties (a kill and resume ends with the same DAG, a session is skipped only after an
iteration that made no node) are the serial loop's; `tests/e2e/test_parallel_loop.py` and
`tests/e2e/test_fault_resume_parallel.py` run several in flight (`loop={"parallel_iterations": 3}`)."""


def _make_run(path: Path, seed: int = 0, **overrides: Any) -> Path:
    sets: dict[str, Any] = {k: dict(v) for k, v in SMALL.items()}
    for key, table in overrides.items():
        sets.setdefault(key, {}).update(table)
    init_run(path, template="opsdesk", seed=seed, overrides=sets)
    return path


@pytest.fixture(scope="session")
def make_run() -> Callable[..., Path]:
    """`make_run(path, seed=0, **tables)`: an opsdesk run folder at `path` (offline backend), the small config
    with each `table` merged in (`loop={"max_iterations": 3}`); returns `path`."""
    return _make_run


def _dag_signature(run_dir: Path) -> dict[str, Any]:
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        commits = {n.id: n.commit for n in store.nodes()}
        nodes = [
            (
                n.commit,
                commits.get(n.parent_id) if n.parent_id else None,
                n.status,
                n.origin,
                n.patch_kind,
                n.batch_before,
                n.batch_after,
                n.dev_mean,
                n.test_mean,
            )
            for n in store.nodes()
        ]
        edges = [
            (commits[e.parent_id], commits[e.child_id], e.kind, e.diff_sha, e.fixed, e.regressed) for e in store.edges()
        ]
        iterations = [
            (i.number, i.batch, commits.get(i.parent_id or -1), commits.get(i.candidate_id or -1), i.phase, i.decision)
            for i in store.iterations()
        ]
        run = store.get_run()
        return {
            "nodes": nodes,
            "edges": edges,
            "iterations": iterations,
            "best": commits.get(run.best_node_id or -1),
            "rollouts": store.count_rollouts(),
        }


@pytest.fixture(scope="session")
def dag_signature() -> Callable[[Path], dict[str, Any]]:
    """`dag_signature(run_dir)`: what must be identical between two runs with the same seed and config (nodes by
    commit, edges, iterations, the best node, the rollout count)."""
    return _dag_signature


def _run_git(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return git_run(run_dir / "harness", *args)


@pytest.fixture(scope="session")
def run_git() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run_git(run_dir, *args)`: git in the run's harness clone (not checked: the test reads the result)."""
    return _run_git


@pytest.fixture
def open_run_context() -> Iterator[Callable[..., RunContext]]:
    """`open_run_context(run_dir, template, evaluator)`: a new run folder of the bundled `template` (seed 0) at
    `run_dir`, opened as a `RunContext` on its real EvoDAG, its evaluator replaced by `evaluator(ctx)` (a test's
    fake); store, executor and harness space are closed when the test ends."""
    with ExitStack() as stack:

        def open_one(run_dir: Path, template: str, evaluator: Callable[[RunContext], Any]) -> RunContext:
            init_run(run_dir, template=template, seed=0)
            paths = RunPaths(run_dir.resolve())
            store = stack.enter_context(EvoDAG(paths.db))
            ctx = open_context(paths, load_run_config(run_dir), store, make_progress(True))
            stack.callback(ctx.space.close)
            stack.callback(ctx.executor.close)
            ctx.evaluator = evaluator(ctx)
            return ctx

        yield open_one

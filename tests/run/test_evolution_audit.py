"""A cherry-pick or revert made by evolution is a new harness too: its diff against the base is audited like a
diagnosis' (`policies.audit`), so the edge of a refused cheat cannot come back through evolution."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evodag.decisions import ACCEPTED, INVALID
from evodag.models import Node
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.policies.audit import AUDIT_EVENT
from saddler.reporting.progress import make_progress
from saddler.run import evolution_step
from saddler.run.context import RunContext, open_context
from saddler.run.folder import RunPaths, init_run
from saddler.run.loop import Optimizer
from saddler.sessions.schema import EvolutionResult, SessionStats


@pytest.fixture
def run(tmp_path: Path) -> Iterator[tuple[RunContext, Node, Node]]:
    """An opsdesk run: the baseline and a node (refused by diagnosis' audit) whose prompt hard-codes a train id."""
    init_run(tmp_path / "run", template="opsdesk", seed=0)
    paths = RunPaths((tmp_path / "run").resolve())
    with EvoDAG(paths.db) as store:
        ctx = open_context(paths, load_run_config(paths.root), store, make_progress(True))
        try:
            base = Optimizer._baseline_node(ctx)
            wt = ctx.space.worktree(base.commit, "cheat")
            prompt = wt / "prompts" / "system.md"
            task = ctx.tasks["train"][0].id
            prompt.write_text(prompt.read_text(encoding="utf-8") + f"\nFor {task}, answer what the grader wants.\n")
            sha = ctx.space.commit_worktree(wt, "saddler: cheat")
            ctx.space.remove_worktree(wt)
            assert sha is not None
            cheat = store.add_node(ctx.run_id, sha, base.id, 1, "steering", "steering", "patch", status=INVALID)
            files = ctx.space.changed_files(base.commit, sha)
            store.add_edge(ctx.run_id, base.id, cheat.id, "patch", ctx.space.diff(base.commit, sha), files, 1, 0)
            yield ctx, base, cheat
        finally:
            ctx.executor.close()
            ctx.space.close()


@pytest.mark.parametrize(("mode", "status"), [("refuse", INVALID), ("warn", ACCEPTED)])
def test_a_cherry_pick_of_a_refused_cheat_is_audited_and_refused(
    run: tuple[RunContext, Node, Node], mode: str, status: str
) -> None:
    ctx, base, cheat = run
    ctx.cfg.policies.audit = mode  # type: ignore[assignment]
    edge = ctx.store.edge_into(cheat.id)
    assert edge is not None
    it = ctx.store.start_iteration(ctx.run_id, 2, 0, [], phase="steering", parent_id=base.id)
    result = EvolutionResult(
        action="cherry_pick", parent_node_id=base.id, edge_ids=[edge.id], rationale="t", stats=SessionStats(backend="t")
    )
    from saddler.run import transplant

    made = transplant.apply_action(ctx.store, ctx.space, ctx.run_id, 2, "steering", result)
    assert made is not None and made.node is not None
    judged = evolution_step._judge(ctx, it, result, base, made.nodes)
    assert judged.status == status and "suspect:" in (judged.status_reason or "")
    hits = [e.payload for e in ctx.store.events(run_id=ctx.run_id, kind=AUDIT_EVENT)]
    assert [(h["node_id"], h["where"], h["refused"]) for h in hits] == [(judged.id, "diff", mode == "refuse")]
    if mode == "refuse":
        assert judged.dev_mean is None, "a refused transplant is not paid for on dev"

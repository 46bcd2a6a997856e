"""An idea whose one change on a parent moved no task stays open once more there, with that change's diff: the
evaluation is evidence against the change, not yet against the idea (an LLM's unfinished draft of a right fix).
The same change again is refused unevaluated, and a second evaluated change of the idea closes it there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest
from gitrepo import git

from evodag.store import EvoDAG
from saddler.run.loop import Optimizer
from saddler.sessions import registry
from saddler.sessions.offline import OfflineBackend
from saddler.sessions.prompts import render
from saddler.sessions.proposer import MISSED_NOTE, missed_edit
from saddler.sessions.schema import DiagnosisRequest, DiagnosisResult

pytestmark = pytest.mark.slow


class DraftFirst(OfflineBackend):
    """Diagnoses as the offline rules do, but the first patch it writes, and that idea's next ones up to `drafts`
    in all, are only the missed-attempt comment in their first file (the calibrated author's unfinished draft)."""

    drafts: ClassVar[int] = 1
    requests: ClassVar[list[DiagnosisRequest]] = []
    written: ClassVar[list[tuple[int, str, bool]]] = []  # (iteration, origin, a draft)

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        self.requests.append(request)
        result = super().diagnose_patch(request)
        if result.hypothesis is None:
            return result
        drafted = [o for _, o, d in self.written if d]
        draft = not drafted or (drafted[0] == result.hypothesis.origin and len(drafted) < self.drafts)
        self.written.append((request.iteration, result.hypothesis.origin, draft))
        if draft:
            root = Path(request.worktree)
            git(root, "stash", "--include-untracked")  # the patch out, as if never written (raises on failure)
            first = root / result.hypothesis.files[0]  # appended to, or made (a new file's patch), as offline does
            first.parent.mkdir(parents=True, exist_ok=True)
            with first.open("a", encoding="utf-8") as fh:
                fh.write(missed_edit(first.name))
        return result


@pytest.fixture(autouse=True)
def backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BACKENDS, "DraftFirst", f"{__name__}:DraftFirst")
    DraftFirst.requests.clear()
    DraftFirst.written.clear()
    DraftFirst.drafts = 1


def test_an_unfinished_draft_that_moved_nothing_leaves_its_idea_open_and_the_fix_is_evaluated(
    tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    run = make_run(tmp_path / "run", seed=2, loop={"max_iterations": 6}, sessions={"backend": "DraftFirst"})
    Optimizer(run, quiet=True).run()
    _, origin, draft = DraftFirst.written[0]
    assert draft
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        nodes = [n for n in store.nodes() if n.origin == origin]
        first = nodes[0]
        edge = store.edge_into(first.id)
        assert first.status == "rejected" and edge is not None and edge.fixed == edge.regressed == []
        later = [n for n in nodes[1:] if n.parent_id == first.parent_id]
    assert later, f"{origin} written again on n{first.parent_id} after its draft moved nothing"
    again = later[0]
    assert again.status in ("accepted", "rejected") and "already tried" not in again.status_reason
    assert "its diff was an unfinished draft" in str((again.hypothesis or {}).get("diagnosis"))
    request = next(r for r in DraftFirst.requests if r.iteration == again.iteration and r.attempt == 0)
    assert origin not in request.excluded and MISSED_NOTE in request.no_effect[origin]
    prompt = render("diagnosis_patch", request)
    assert "one version that does is welcome; the same change is refused" in prompt and MISSED_NOTE in prompt
    # a patch written in full that moved nothing (a placebo) is not written again on its parent: its diff says why
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        for node in store.nodes():
            edge = store.edge_into(node.id)
            full = (node.iteration, node.origin, False) in DraftFirst.written
            if full and node.status == "rejected" and edge is not None and edge.fixed == edge.regressed == []:
                siblings = [n for n in store.nodes() if n.parent_id == node.parent_id and n.origin == node.origin]
                assert siblings == [node]


def test_the_same_no_effect_change_is_refused_unevaluated_and_a_second_evaluated_one_closes_the_idea(
    tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    DraftFirst.drafts = 2  # the retry is the same draft: refused unevaluated, which leaves the idea open
    run = make_run(tmp_path / "run", seed=2, loop={"max_iterations": 6}, sessions={"backend": "DraftFirst"})
    Optimizer(run, quiet=True).run()
    _, origin, _ = DraftFirst.written[0]
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        first = next(n for n in store.nodes() if n.origin == origin)
        same = [n for n in store.nodes() if n.origin == origin and n.parent_id == first.parent_id and n != first]
    refused = [n for n in same if n.status == "invalid"]
    evaluated = [n for n in same if n.status != "invalid"]
    assert (
        refused and refused[0].status_reason == f"the same change as {origin} (n{first.id}), which moved no task here"
    )
    assert evaluated and evaluated[0].id > refused[0].id, "the idea written in full after the refusal"
    on_parent = [r for r in DraftFirst.requests if r.parent_node_id == first.parent_id]
    wrote = [r for r in on_parent if r.iteration == evaluated[0].iteration][-1]  # the request it answered
    assert origin in wrote.no_effect and origin not in wrote.excluded
    after = [r for r in on_parent if r.iteration > evaluated[0].iteration]
    assert all(origin in r.excluded and origin not in r.no_effect for r in after)

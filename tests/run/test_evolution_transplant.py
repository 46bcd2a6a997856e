"""Cherry-pick and revert apply every listed edge in order, each a real commit with its node and edge, or name the
edge that failed; and evolution answers are checked against the store before anything is applied."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pytest

from evodag.models import Node
from evodag.store import EvoDAG
from saddler.harness.gitcmd import logical_commit_time
from saddler.harness.space import HarnessSpace
from saddler.run import evolution_request
from saddler.run.transplant import apply_action
from saddler.sessions.schema import EvolutionResult, SessionStats

WHERE = {"run_dir": "/r", "db_path": "/r/sessions/evodag-view.sqlite", "readable": ["/r/traces"]}


@pytest.fixture
def world(
    tmp_path: Path,
    source_repo: Callable[..., Path],
    write_files: Callable[[Path, dict[str, str]], None],
    harness_files: dict[str, str],
) -> Iterator[tuple[EvoDAG, HarnessSpace, dict[str, Node]]]:
    """Baseline n1; n2 adds tools/new.py, n3 rewords the prompt, n4 rewords it differently (all from n1)."""
    prompt = harness_files["prompts/system.md"]
    source = source_repo(tmp_path / "user-harness")
    space = HarnessSpace.create(source, tmp_path / "run" / "harness", tmp_path / "run" / "worktrees")
    store = EvoDAG(tmp_path / "run" / "evodag.sqlite")
    run = store.create_run({}, 0).id
    base = space.baseline_commit()
    nodes = {"n1": store.add_node(run, base, None, 0, "baseline", "baseline", "baseline", status="baseline")}
    edits = {
        "n2": {"tools/new.py": "N = 1\n"},
        "n3": {"prompts/system.md": prompt.replace("Answer briefly.", "Answer in detail.")},
        "n4": {"prompts/system.md": prompt.replace("Answer briefly.", "Answer in one word.")},
    }
    for i, (name, files) in enumerate(edits.items(), start=1):
        wt = space.worktree(base, name)
        write_files(wt, files)
        sha = space.commit_worktree(wt, name)
        space.remove_worktree(wt)
        assert sha is not None
        nodes[name] = store.add_node(run, sha, nodes["n1"].id, i, "capability", "capability", f"o{i}", "accepted")
        store.add_edge(run, nodes["n1"].id, nodes[name].id, "patch", space.diff(base, sha), list(files), 1, 0)
    yield store, space, nodes
    store.close()


def _pick(
    base: Node, edges: list[int], action: Literal["cherry_pick", "revert", "rebase"] = "cherry_pick"
) -> EvolutionResult:
    return EvolutionResult(
        action=action, parent_node_id=base.id, edge_ids=edges, rationale="test", stats=SessionStats(backend="t")
    )


def test_every_listed_edge_is_applied_in_order_as_its_own_commit(
    world: tuple[EvoDAG, HarnessSpace, dict], git_in: Callable[..., str]
) -> None:
    store, space, nodes = world
    made = apply_action(store, space, 1, 4, "capability", _pick(nodes["n1"], [1, 2]))
    assert made is not None and made.error == "" and len(made.nodes) == 2
    first, last = made.nodes
    assert (first.parent_id, last.parent_id) == (nodes["n1"].id, first.id)
    assert [store.edge_into(n.id).source_edge_id for n in made.nodes] == [1, 2]  # type: ignore[union-attr]
    assert git_in("rev-parse", f"{last.commit}^", cwd=space.repo_dir).strip() == first.commit, "a chain of commits"
    assert space.read_file(last.commit, "tools/new.py") == "N = 1\n"
    assert "Answer in detail." in (space.read_file(last.commit, "prompts/system.md") or "")
    assert made.key == f"cherry_pick:1,2@{nodes['n1'].id}"
    space.clock = lambda: logical_commit_time(4)  # the loop's commit date of iteration 4
    made = apply_action(store, space, 1, 4, "capability", _pick(nodes["n1"], [1, 2]))
    assert made is not None and len(made.nodes) == 2
    again = apply_action(store, space, 1, 4, "capability", _pick(nodes["n1"], [1, 2]))
    assert again is not None and [n.id for n in again.nodes] == [n.id for n in made.nodes], "a resume re-finds them"


def test_a_conflicting_edge_is_named_and_nothing_is_stored(world: tuple[EvoDAG, HarnessSpace, dict]) -> None:
    store, space, nodes = world
    count = len(store.nodes())
    made = apply_action(store, space, 1, 4, "capability", _pick(nodes["n1"], [1, 2, 3]))
    assert made is not None and made.nodes == [] and made.failed_edge == 3
    assert made.error == "edge 3 failed after applying edge(s) 1, 2: cherry-pick: conflict in: prompts/system.md"
    assert len(store.nodes()) == count


def test_answers_naming_what_does_not_exist_are_refused(world: tuple[EvoDAG, HarnessSpace, dict]) -> None:
    store, _, nodes = world
    request = evolution_request.build_request(store, 1, 5, nodes["n2"], nodes["n2"], WHERE)
    store.update_node(nodes["n4"].id, status="rejected")
    request_rejected = evolution_request.build_request(store, 1, 5, nodes["n2"], nodes["n2"], WHERE)
    n1, n2 = nodes["n1"].id, nodes["n2"].id

    def error(result: EvolutionResult, req: object = request) -> str:
        return evolution_request.answer_error(store, req, result)  # type: ignore[arg-type]

    assert error(_pick(nodes["n2"], [2])) == ""
    assert (
        error(_pick(nodes["n2"], [999])) == "edge 999 does not exist in this run (its edges are listed in the prompt)"
    )
    assert error(_pick(nodes["n2"], [2, 2])) == "edge 2 is listed twice"
    assert (
        error(_pick(nodes["n2"], [1])) == f"edge 1 is already on node {n2}'s lineage: there is nothing to cherry-pick"
    )
    assert error(_pick(nodes["n2"], [2], "revert")) == (
        f"edge 2 is not on node {n2}'s lineage: a revert undoes a change the base holds"
    )
    assert error(_pick(nodes["n2"], [], "revert")) == "a revert needs edge_ids: the edges to apply, in order"
    ghost = Node(4242, 1, "x", None, 0, "p", "k", "o", "accepted")
    assert (
        error(_pick(ghost, [], "rebase")) == "node 4242 does not exist in this run (its nodes are listed in the prompt)"
    )
    rejected = _pick(nodes["n4"], [], "rebase")
    assert error(rejected, request_rejected) == (
        f"node {nodes['n4'].id} is rejected: evolution may start from nodes {n1}, {n2}, {nodes['n3'].id} only"
    )
    anything = evolution_request.build_request(store, 1, 5, nodes["n2"], nodes["n2"], WHERE, bases="any")
    assert error(rejected, anything) == ""

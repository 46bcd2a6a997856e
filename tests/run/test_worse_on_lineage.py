"""An idea whose change made an ancestor clearly worse is excluded on the ancestor's descendants
(`policies.exclude_worse_on_lineage`): the lineage carries the lesson, so an author writing it again costs no
iteration. A tie, or a loss inside the noise, excludes nothing beyond the parent it was tried on."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from evodag.store import EvoDAG
from saddler.run.diagnosis import Excluded, worse_on_lineage
from saddler.sessions.diagnosis_prompt import excluded_note
from saddler.sessions.schema import DiagnosisRequest


def _dag(path: Path) -> tuple[EvoDAG, dict[str, int]]:
    """n1 baseline; n2 = X on n1, clearly worse (P 0.12); n3 = A on n1, kept; n4 = Y on n3, a close loss (P 0.25);
    n5 = B on n3, kept; n6 = Z on n5 decided in iteration 5, clearly worse."""
    store = EvoDAG(path)
    run = store.create_run({}, 0).id
    ids: dict[str, int] = {}

    def node(name: str, parent: str | None, number: int, origin: str, status: str, confidence: float | None) -> None:
        parent_id = ids[parent] if parent else None
        made = store.add_node(run, f"{number:040x}", parent_id, number, "capability", "capability", origin, status)
        ids[name] = made.id
        if parent_id is not None:
            store.add_edge(run, parent_id, made.id, "patch", f"diff {name}", ["tools.py"], 1, 0)
        if confidence is not None:
            it = store.start_iteration(run, number, 0, ["t1"], parent_id=parent_id, candidate_id=made.id)
            store.update_iteration(it.id, evidence={"confidence": confidence, "wins": 0, "losses": 2})

    node("n1", None, 0, "baseline", "baseline", None)
    node("n2", "n1", 1, "bank:x", "rejected", 0.12)
    node("n3", "n1", 2, "bank:a", "accepted", 0.88)
    node("n4", "n3", 3, "bank:y", "rejected", 0.25)
    node("n5", "n3", 4, "bank:b", "accepted", 0.88)
    node("n6", "n5", 5, "bank:z", "rejected", 0.06)
    return store, ids


def _ctx(store: EvoDAG) -> SimpleNamespace:
    return SimpleNamespace(store=store, run_id=1, acceptance=SimpleNamespace(confidence=0.8))


def test_only_clear_losses_on_strict_ancestors_of_other_iterations_seen_are_excluded(tmp_path: Path) -> None:
    store, ids = _dag(tmp_path / "evodag.sqlite")
    ctx = _ctx(store)
    n5, everything = store.get_node(ids["n5"]), ids["n6"]
    assert worse_on_lineage(ctx, n5, iteration=6, upto=everything) == {  # type: ignore[arg-type]
        "bank:x": f"made n{ids['n2']} clearly worse than its parent n{ids['n1']}, an ancestor of this parent "
        "(P(better) 0.12)"
    }  # Y lost inside the noise (0.25 > 0.20); Z was tried on n5 itself: the parent's own exclusion covers it
    n6_child = store.get_node(ids["n6"])  # a descendant of n5, once iteration 5 is decided
    assert set(worse_on_lineage(ctx, n6_child, iteration=7, upto=everything)) == {"bank:x", "bank:z"}  # type: ignore[arg-type]
    assert set(worse_on_lineage(ctx, n6_child, iteration=5, upto=everything)) == {"bank:x"}  # type: ignore[arg-type]
    # iteration 7 began its diagnosis before n6 existed (iteration 5 still in flight): it does not see n6's loss
    assert set(worse_on_lineage(ctx, n6_child, iteration=7, upto=ids["n5"])) == {"bank:x"}  # type: ignore[arg-type]
    assert worse_on_lineage(ctx, store.get_node(ids["n1"]), iteration=9, upto=everything) == {}  # type: ignore[arg-type]
    store.close()


def test_an_idea_worse_upstream_is_refused_with_where_and_listed_apart_in_the_prompt(tmp_path: Path) -> None:
    excluded = Excluded(plans={"bank:a": "plan A"}, worse_on_lineage={"bank:x": "made n2 clearly worse (P 0.12)"})
    assert excluded.origins == ["bank:a", "bank:x"]
    assert excluded.excluded_why("bank:a") == "bank:a was already tried"
    assert excluded.excluded_why("bank:x") == "bank:x made n2 clearly worse (P 0.12)"
    assert excluded.excluded_why("bank:new") == ""
    request = DiagnosisRequest(
        run_dir="r", db_path="d", worktree="w", iteration=3, parent_node_id=5, phase="capability",
        allowed_kinds=["capability"], component_globs={}, evidence=[], excluded=excluded.origins,
        excluded_plans={"bank:a": "plan A"}, worse_on_lineage=excluded.worse_on_lineage,
    )  # fmt: skip
    assert excluded_note(request) == (
        "\nExcluded here (already tried on this parent; do not try again):\n- plan A (`bank:a`)\n"
        "\nExcluded on this lineage (the idea made an ancestor clearly worse; do not try it again):\n"
        "- `bank:x`: made n2 clearly worse (P 0.12)\n"
    )

"""build_report figures, report.md and results.tsv on the realistic fixture run (real SQLite store).

Every expected figure is derived by hand from the tables in `tests/plugins/reports.py`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evodag.models import Node, RolloutRow
from evodag.store import EvoDAG
from saddler.reporting.figures import build_report, hypothesis_summary, write_report
from saddler.reporting.markdown import table
from saddler.reporting.results_tsv import write_results_tsv
from saddler.scoring import node_score

if TYPE_CHECKING:
    from plugins.reports import Fixture


@pytest.fixture(scope="module")
def finished(
    tmp_path_factory: pytest.TempPathFactory, build_run: Callable[..., Any], open_store: Callable[[Any], Any]
) -> tuple[EvoDAG, Fixture, Path]:
    run_dir = tmp_path_factory.mktemp("run")
    store, clock = open_store(run_dir / "evodag.db")
    fx = build_run(store, clock)
    return store, fx, run_dir


def _pstdev(values: list[float]) -> float:
    m = sum(values) / len(values)
    return round(math.sqrt(sum((v - m) ** 2 for v in values) / len(values)), 6)


def test_summary_counts_and_run(finished: tuple[EvoDAG, Fixture, Path]) -> None:
    store, fx, _ = finished
    r = build_report(store)
    assert r["run"] == {
        "id": fx.run_id, "name": "fixture-run", "benchmark": "opsdesk", "seed": 7, "status": "finished",
        "started_at": fx.started, "finished_at": fx.finished, "termination_reason": "max_iterations",
        "wall_time_s": 3723.0, "test_runs": 3,
    }  # fmt: skip
    assert r["baseline"] == {"node": fx.ids["N1"], "commit": fx.fake_commit("N1")}
    assert r["best"] == {"node": fx.ids["N7"], "commit": fx.fake_commit("N7"), "status": "accepted"}
    # baseline test runs: 2/4, 1/4, 3/4; best: 4/4, 3/4, 4/4
    base_runs, best_runs = [0.5, 0.25, 0.75], [1.0, 0.75, 1.0]
    assert r["summary"]["test"] == {
        "baseline": {"mean": 0.5, "std": _pstdev(base_runs), "runs": 3},
        "final": {"mean": round(11 / 12, 6), "std": _pstdev(best_runs), "runs": 3},
        "delta": round(11 / 12 - 0.5, 6),
        "delta_ci95": [0.083333, 0.833333],  # paired bootstrap over the 4 test tasks (seeded by the run's seed)
    }
    assert r["summary"]["test"]["baseline"]["std"] == 0.204124
    assert r["summary"]["dev"] == {
        "baseline": {"mean": 0.5, "std": 0.0},
        "final": {"mean": 1.0, "std": 0.0},
        "delta": 0.5,
    }
    assert r["counts"] == {
        "iterations": 8, "candidates": 9, "kept": 5, "accepted": 4, "neutral": 1, "discarded": 3, "invalid": 1,
        "pending": 0, "decisions": {"accepted": 3, "invalid": 1, "neutral": 1, "no_patch": 1, "rejected": 2},
    }  # fmt: skip
    assert json.loads(json.dumps(r)) == r


def _mut(
    fx: Fixture,
    label: str,
    it: int,
    kind: str,
    subtype: str,
    origin: str,
    hyp: str,
    batch: tuple[float | None, float | None],
    dev: float,
    dev_delta: float,
) -> dict[str, Any]:
    before, after = batch  # exact fractions
    delta = None if before is None or after is None else round(after - before, 6)
    return {
        "node": fx.ids[label],
        "iteration": it,
        "commit": fx.fake_commit(label),
        "status": "accepted",
        "patch_kind": kind,
        "subtype": subtype,
        "origin": origin,
        "hypothesis": hyp,
        "batch_before": None if before is None else round(before, 6),
        "batch_after": None if after is None else round(after, 6),
        "batch_delta": delta,
        "dev_mean": dev,
        "dev_before": round(dev - dev_delta, 6),
        "dev_delta": dev_delta,
        "batch_delta_text": "—" if delta is None else f"{delta:+.3f}",
        "dev_delta_text": f"{dev_delta:+.3f}",
    }


def test_effective_mutations(finished: tuple[EvoDAG, Fixture, Path]) -> None:
    store, fx, _ = finished
    eff = build_report(store)["effective_mutations"]
    n2 = _mut(
        fx,
        "N2",
        1,
        "capability",
        "tool",
        "bank:paginate_tools",
        "Add pagination to list_tickets so long queues are read fully",
        (1 / 3, 2 / 3),
        0.75,
        0.25,
    )
    n7 = _mut(fx, "N7", 6, "rebase", "", "rebase", "rebase of the change into N6 onto N2", (None, None), 1.0, 0.25)
    n5 = _mut(
        fx,
        "N5",
        4,
        "steering",
        "prompt",
        "patch",
        "Tell the agent to confirm the ticket id before closing it",
        (1 / 3, 1.0),
        0.5,
        -0.25,
    )
    # N6's nearest dev-evaluated ancestor is N5 (0.5), so its dev delta is +0.25
    n6 = _mut(
        fx,
        "N6",
        5,
        "steering",
        "reminder",
        "bank:verify_reminder",
        "Remind the agent to verify the final state",
        (1 / 3, 2 / 3),
        0.75,
        0.25,
    )
    assert eff["lineage"] == [n2, n7]
    assert eff["accepted"] == [n2, n5, n6, n7]


def test_per_task_changes_and_failed_mutations(finished: tuple[EvoDAG, Fixture, Path]) -> None:
    store, fx, _ = finished
    r = build_report(store)

    def task(t: str, g: str, bp: int, fp: int, change: str) -> dict[str, Any]:
        return {
            "task": t,
            "group": g,
            "baseline": round(bp / 3, 6),
            "baseline_passes": bp,
            "baseline_runs": 3,
            "final": round(fp / 3, 6),
            "final_passes": fp,
            "final_runs": 3,
            "change": change,
        }

    assert r["per_task"] == [
        task("te-1", "g-t1", 3, 3, "same"),
        task("te-2", "g-t1", 0, 3, "fixed"),
        task("te-3", "g-t2", 1, 2, "fixed"),
        task("te-4", "g-t2", 2, 3, "fixed"),
    ]
    ids = fx.ids
    assert r["failed_mutations"] == [
        {"iteration": 2, "node": ids["N3"], "origin": "bank:retry_transient", "patch_kind": "capability",
         "hypothesis": "Retry transient tool errors in the agent loop", "status": "rejected",
         "reason": "batch 0.33 -> 0.33: not a strict improvement"},
        {"iteration": 3, "node": ids["N4"], "origin": "patch", "patch_kind": "capability",
         "hypothesis": "Raise the tool timeout in saddler.toml", "status": "invalid",
         "reason": "protected path touched: saddler.toml"},
        {"iteration": 6, "node": ids["N8"], "origin": "bank:confirm_hook", "patch_kind": "steering",
         "hypothesis": "Add a hook that forces | a confirmation before every send", "status": "rejected",
         "reason": "batch 0.67 -> 0.33: not a strict improvement"},
        {"iteration": 7, "node": ids["N9"], "origin": "bank:retry_transient", "patch_kind": "cherry_pick",
         "hypothesis": "cherry_pick of the change into N3 onto N7", "status": "rejected",
         "reason": "cherry_pick: dev vs base"},
        {"iteration": 7, "node": None, "origin": "", "patch_kind": "", "hypothesis": "", "status": "no_patch",
         "reason": fx.no_patch_reason},
    ]  # fmt: skip


def test_patch_kind_statistics_and_cost(finished: tuple[EvoDAG, Fixture, Path]) -> None:
    store, _, _ = finished
    r = build_report(store)

    def rate(n: int, acc: int, total: int = 7) -> dict[str, Any]:
        return {"patches": n, "share": round(n / total, 6), "accepted": acc, "acceptance_rate": round(acc / n, 6)}

    # decided diagnosis patches: N2 cap/tool acc, N3 cap/loop, N4 cap/infra, N5 steer/prompt acc,
    # N6 steer/reminder acc, N8 steer/hook, N10 steer/prompt (neutral is not an acceptance)
    assert r["patch_kinds"] == {
        "patches": 7,
        "by_kind": {"capability": rate(3, 1), "steering": rate(4, 2)},
        "by_subtype": {
            "hook": rate(1, 0),
            "infra": rate(1, 0),
            "loop": rate(1, 0),
            "prompt": rate(2, 1),
            "reminder": rate(1, 1),
            "tool": rate(1, 1),
        },
        "evolution": {"cherry_pick": 1, "rebase": 1},
    }
    # train rows: it1 3+3, it2 3+3, it3 2 (tr-1 cached), it4 0+3, it5 3+3, it6 3+3, it7 3, it8 2+3 = 37;
    # dev 6 nodes x 4 = 24; test 2 nodes x 4 tasks x 3 runs = 24
    assert r["cost"] == {
        "rollouts": {"total": 85, "by_split": {"train": 37, "dev": 24, "test": 24}, "cost_usd": 0.85,
                     "infra_errors": 0},
        # 8 diagnoses x 3 traces; N2's tr-5 and tr-7 (it4) and N7's tr-6 (it8) were already shown
        "traces_used": {"total": 24, "distinct": 21},
        "sessions": {
            "count": 21, "turns": 8 * 6 + 6 * 2 + 7 * 3, "cli_attempts": 21, "tokens_in": 8000 + 2400 + 2100,
            "tokens_out": 1600 + 600 + 350, "cost_usd": 0.59,
            "by_role": {"diagnosis_patch": {"count": 8, "turns": 48, "cost_usd": 0.4},
                        "evolution": {"count": 7, "turns": 21, "cost_usd": 0.07},
                        "reflection": {"count": 6, "turns": 12, "cost_usd": 0.12}},
        },
        "wall_time_s": 3723.0,
    }  # fmt: skip


def test_the_per_task_table_has_no_column_the_data_cannot_fill(
    tmp_path: Path, build_run: Callable[..., Any], open_store: Callable[[Any], Any]
) -> None:
    """Only the baseline and the best are run on test, so where on the lineage a test task changed is unknown: no
    "Changed in" column that would always read "—"."""
    store, clock = open_store(tmp_path / "evodag.db")
    build_run(store, clock)
    assert all("changed_in" not in t for t in build_report(store)["per_task"])
    write_report(store, tmp_path, plot=False)
    assert "Changed in" not in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_partial_run_has_no_test_figures(
    tmp_path: Path, build_run: Callable[..., Any], open_store: Callable[[Any], Any]
) -> None:
    store, clock = open_store(tmp_path / "evodag.db")
    fx = build_run(store, clock, iterations=5, finish=False)
    r = build_report(store)
    # the best recorded while the run went: N6 over N2 (both 0.75), accepted on N2's line (via N5)
    assert r["best"] == {"node": fx.ids["N6"], "commit": fx.fake_commit("N6"), "status": "accepted"}
    assert r["summary"]["test"] == {
        "baseline": {"mean": None, "std": None, "runs": 0},
        "final": {"mean": None, "std": None, "runs": 0},
        "delta": None,
        "delta_ci95": None,
    }
    assert r["per_task"] == []
    assert r["run"]["wall_time_s"] is None
    text = write_report(store, tmp_path, plot=False).read_text()
    assert "No test rollouts recorded." in text
    assert "| Test Pass@1 (k=0) | — | — | — |" in text
    assert "baseline_test: nan\nbest_test: nan\ndelta_test: nan\nbaseline_dev: 0.5000\nbest_dev: 0.7500\n" in text
    assert not (tmp_path / "progress.png").exists()


def test_report_md_tables_and_metric_lines(finished: tuple[EvoDAG, Fixture, Path]) -> None:
    store, fx, run_dir = finished
    path = write_report(store, run_dir)
    assert path == run_dir / "report.md"
    assert (run_dir / "progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = path.read_text()
    ids = fx.ids
    for line in [
        "# Saddler report: fixture-run",
        "**Termination:** max_iterations",
        "## Result summary",
        "| Metric | Baseline | Final | Delta |",
        "| Test Pass@1 (k=3) | 0.500 ± 0.204 | 0.917 ± 0.118 | +0.417 (95% CI +0.083 … +0.833) |",
        "| Dev Pass@1 | 0.500 ± 0.000 | 1.000 ± 0.000 | +0.500 |",
        "| Iterations | — | 8 | — |",
        "| Kept | — | 5 | — |",
        "| Discarded | — | 3 | — |",
        "| Invalid | — | 1 | — |",
        "![progress](progress.png)",
        "## Effective mutations",
        f"| 1 | {ids['N2']} | accepted | capability | tool | bank:paginate_tools | Add pagination to list_tickets so "
        "long queues are read fully | +0.333 | +0.250 |",
        f"| 6 | {ids['N7']} | accepted | rebase | — | rebase | rebase of the change into N6 onto N2 | — | +0.250 |",
        f"| 4 | {ids['N5']} | accepted | steering | prompt | patch | Tell the agent to confirm the ticket id before "
        "closing it | +0.667 | -0.250 |",
        "## Per-task (assertion-level) changes",
        "| Task | Group | Baseline | Final | Change |",
        "| te-2 | g-t1 | 0/3 | 3/3 | fixed |",
        "| te-3 | g-t2 | 1/3 | 2/3 | fixed |",
        "1 of 4 test tasks unchanged (passes / test runs).",
        "## Failed mutations",
        f"| 6 | {ids['N8']} | rejected | bank:confirm_hook | Add a hook that forces \\| a confirmation before every "
        "send | batch 0.67 -> 0.33: not a strict improvement |",
        f"| 7 | — | no_patch | — | — | {fx.no_patch_reason} |",
        "| capability | 3 | 43% | 1 | 33% |",
        "| steering | 4 | 57% | 2 | 50% |",
        "| reminder | 1 | 14% | 1 | 100% |",
        "Evolution operations: cherry_pick 1, rebase 1.",
        "| Rollouts executed | 85 (train 37, dev 24, test 24) |",
        "| Traces used by diagnosis | 24 (21 distinct) |",
        "| Optimizer sessions | 21 (diagnosis_patch 8, evolution 7, reflection 6) |",
        "| Optimizer tokens in / out | 12500 / 2550 |",
        "| Wall time | 1h 02m 03s |",
    ]:
        assert line in text.splitlines(), line
    assert text.endswith(
        "```\nbaseline_test: 0.5000\nbest_test: 0.9167\ndelta_test: +0.4167\nbaseline_dev: 0.5000\nbest_dev: 1.0000\n"
        f"best_node: {ids['N7']}\niterations: 8\nrollouts: 85\ninfra_errors: 0\noptimizer_cost_usd: 0.5900\n```\n"
    )


def test_results_tsv_rows(finished: tuple[EvoDAG, Fixture, Path], tmp_path: Path) -> None:
    store, fx, _ = finished
    path = write_results_tsv(store, tmp_path / "results.tsv")
    c = {label: fx.fake_commit(label)[:7] for label in ("N1", "N2", "N3", "N4", "N5", "N6", "N7", "N8", "N9", "N10")}
    assert path.read_text().splitlines() == [
        "commit\tmetric\tstatus\tdescription\tscored_on",
        f"{c['N1']}\t0.5000\tkeep\tbaseline\tdev",
        f"{c['N2']}\t0.7500\tkeep\tbank:paginate_tools: Add pagination to list_tickets so long queues are read "
        "fully\tdev",
        f"{c['N3']}\t0.3333\tdiscard\tbank:retry_transient: Retry transient tool errors in the agent loop\tbatch",
        f"{c['N4']}\t0.0000\tcrash\tpatch: Raise the tool timeout in saddler.toml\tnone",
        f"{c['N5']}\t0.5000\tkeep\tpatch: Tell the agent to confirm the ticket id before closing it\tdev",
        f"{c['N6']}\t0.7500\tkeep\tbank:verify_reminder: Remind the agent to verify the final state\tdev",
        f"{c['N7']}\t1.0000\tkeep\trebase: rebase of the change into N6 onto N2\tdev",
        f"{c['N8']}\t0.3333\tdiscard\tbank:confirm_hook: Add a hook that forces | a confirmation before every "
        "send\tbatch",
        f"{c['N9']}\t0.7500\tdiscard\tbank:retry_transient: cherry_pick of the change into N3 onto N7\tdev",
        f"{c['N10']}\t0.3333\tkeep\tpatch: Shorten the system prompt's escalation section\tbatch",
    ]
    assert all(len(line.split("\t")) == 5 for line in path.read_text().splitlines())


def test_results_tsv_leaves_out_pending_nodes(
    tmp_path: Path, build_run: Callable[..., Any], open_store: Callable[[Any], Any]
) -> None:
    store, clock = open_store(tmp_path / "evodag.db")
    fx = build_run(store, clock, iterations=1, finish=False)
    store.add_node(fx.run_id, fx.fake_commit("X"), fx.ids["N2"], 2, "capability", "capability", "patch")
    rows = write_results_tsv(store, tmp_path / "results.tsv").read_text().splitlines()
    assert [r.split("\t")[2] for r in rows[1:]] == ["keep", "keep"]


def _row(rep: int, passed: bool) -> RolloutRow:
    return RolloutRow(
        id=0,
        run_id=1,
        node_id=1,
        task_id="t",
        split="test",
        seed=0,
        repetition=rep,
        score=0.0,
        passed=passed,
        disposition="success",
    )


@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=6), min_size=1, max_size=5))
def test_pass_at_1_is_mean_and_pstdev_of_per_run_rates(runs: list[list[bool]]) -> None:
    rows = [_row(rep, p) for rep, outcomes in enumerate(runs) for p in outcomes]
    rates = [sum(o) / len(o) for o in runs]
    got = node_score(rows, "pass_rate").figures()
    assert got["runs"] == len(runs)
    assert got["mean"] == pytest.approx(sum(rates) / len(rates), abs=1e-6)
    assert got["std"] == pytest.approx(_pstdev(rates), abs=2e-6)


@given(st.lists(st.text(max_size=30), min_size=1, max_size=4))
def test_table_cells_never_break_the_row(cells: list[str]) -> None:
    header = [f"h{i}" for i in range(len(cells))]
    row = table(header, [list(cells)])[2]
    unescaped = row.replace("\\|", "")
    assert "\n" not in row and unescaped.count("|") == len(cells) + 1


@given(st.text(max_size=300))
def test_hypothesis_summary_is_one_bounded_line(plan: str) -> None:
    node = Node(
        id=1,
        run_id=1,
        commit="c",
        parent_id=None,
        iteration=1,
        phase="steering",
        patch_kind="steering",
        origin="patch",
        status="rejected",
        hypothesis={"plan": plan},
    )
    text = hypothesis_summary(node, limit=80)
    collapsed = " ".join(plan.split())
    assert len(text) <= 80 and "\n" not in text and "\t" not in text
    if not collapsed:
        assert text == "patch"
    elif len(collapsed) <= 80:
        assert text == collapsed
    else:
        assert text == collapsed[:79] + "…"


def test_report_of_a_run_that_has_not_started(tmp_path: Path, open_store: Callable[[Any], Any]) -> None:
    store, _ = open_store(tmp_path / "evodag.db")
    store.create_run({"name": "fresh"}, seed=0)
    r = build_report(store)
    assert (r["baseline"], r["best"], r["per_task"], r["failed_mutations"]) == (None, None, [], [])
    assert r["counts"]["iterations"] == 0 and r["cost"]["rollouts"]["total"] == 0
    text = write_report(store, tmp_path).read_text()
    assert "| Optimizer sessions | 0 |" in text.splitlines()
    assert text.endswith(
        "baseline_test: nan\nbest_test: nan\ndelta_test: nan\nbaseline_dev: nan\nbest_dev: nan\nbest_node: none\n"
        "iterations: 0\nrollouts: 0\ninfra_errors: 0\noptimizer_cost_usd: 0.0000\n```\n"
    )
    assert (tmp_path / "progress.png").stat().st_size > 5_000
    assert (
        write_results_tsv(store, tmp_path / "results.tsv").read_text()
        == "commit\tmetric\tstatus\tdescription\tscored_on\n"
    )


def test_the_report_scores_test_by_the_score_kind_the_run_last_recorded(
    tmp_path: Path, open_store: Callable[[Any], Any], graded_baseline: Callable[..., Any]
) -> None:
    """A run resumed with `--allow-changed` after its score kind changed records the new kind in its inputs; the
    report says and uses that kind, as the loop, finish and the export do."""
    store, _clock = open_store(tmp_path / "evodag.db")
    node = graded_baseline(store, {"policies": {"score": "pass_rate"}}, {"policies.score": "mean_score"}, "a" * 40)
    summary = build_report(store, node.run_id)["summary"]
    assert summary["score"] == "mean_score"
    assert (summary["test"]["final"]["mean"], summary["test"]["final"]["std"]) == (0.6875, 0.0625)

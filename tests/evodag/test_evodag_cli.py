"""`evo-dag` CLI on the fixture DAG: every command in text and --json (exact documents), DB resolution, errors."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from typer.testing import CliRunner

from evodag.cli import app
from evodag.schema import LATEST
from evodag.store import EvoDAG, diff_sha

runner = CliRunner()
CACHE_DIFF = "--- a/tools.py\n+++ b/tools.py\n+cache = True\n"
RETRY_DIFF = "--- a/tools.py\n+++ b/tools.py\n+retry = 3\n"
LOOP_DIFF = "--- a/loop.py\n+++ b/loop.py\n-x\n+y\n"
REBASE_DIFF = "--- a/loop.py\n+++ b/loop.py\n+max_turns = 9\n"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, fixture_dag: Callable[[Path], dict[str, int]]) -> Path:
    path = tmp_path_factory.mktemp("run") / "evodag.sqlite"
    fixture_dag(path)
    return path


def run_cli(db: Path, *args: str, code: int = 0) -> str:
    result = runner.invoke(app, [*args, "--db", str(db)])
    assert result.exit_code == code, result.output
    return result.stdout


def run_json(db: Path, *args: str) -> Any:
    return json.loads(run_cli(db, *args, "--json"))


def brief(i: int, parent: int | None, iteration: int, status: str, dev: float | None, std: float | None,
          lines: int) -> dict[str, Any]:  # fmt: skip
    return {"id": i, "commit": f"c{i}" * 20, "parent_id": parent, "iteration": iteration, "status": status,
            "dev_mean": dev, "dev_std": std, "test_mean": None, "test_std": None, "lines_changed": lines}  # fmt: skip


N1 = brief(1, None, 0, "baseline", 0.5, 0.1, 0)
N5 = brief(5, 1, 4, "neutral", 0.55, 0.05, 4)
N6 = brief(6, 5, 4, "accepted", 0.7, 0.02, 15)
ITERATION_5 = {
    "id": 5, "run_id": 1, "number": 5, "epoch": 2, "parent_id": 1, "candidate_id": 8, "phase": "steering",
    "step": "candidate_evaluated", "decision": None, "stall_count": 1, "exploration": False,
    "started_at": "2026-01-01T00:01:51.000+00:00", "finished_at": None, "evidence": None, "last_rollout": None,
    "finish_order": None, "started_after": None,
}  # fmt: skip


def step(edge_id: int, parent: int, child: int, kind: str, diff: str, files: list[str], added: int, removed: int
         ) -> dict[str, Any]:  # fmt: skip
    return {"edge_id": edge_id, "parent_id": parent, "child_id": child, "kind": kind, "files_changed": files,
            "lines_added": added, "lines_removed": removed, "diff": diff}  # fmt: skip


def test_summary(db: Path) -> None:
    assert run_json(db, "summary") == {
        "metric": None, "batch_metric": False,
        "run": {"id": 1, "seed": 7, "started_at": "2026-01-01T00:00:01.000+00:00", "finished_at": None,
                "termination_reason": None, "best_node_id": 6, "baseline_node_id": 1, "status": "running"},
        "nodes": {"total": 8, "by_status": {"accepted": 3, "baseline": 1, "invalid": 1, "neutral": 1, "pending": 1,
                                            "rejected": 1}},
        "rollouts": {"count": 32, "cost": 0.42, "infra_errors": 0},
        "sessions": {"count": 4, "cost": 1.0},
        "baseline": N1,
        "best": N6,
        "iteration": {**ITERATION_5, "batch": ["t-a", "t-b", "t-c"]},
        "recent_decisions": [
            {"number": 4, "decision": "accepted", "parent_id": 1, "candidate_id": 6},
            {"number": 3, "decision": "accepted", "parent_id": 2, "candidate_id": 4},
            {"number": 2, "decision": "rejected", "parent_id": 2, "candidate_id": 3},
            {"number": 1, "decision": "accepted", "parent_id": 1, "candidate_id": 2},
        ],
    }  # fmt: skip
    assert run_cli(db, "summary").splitlines() == [
        "run 1  running  seed 7  started 2026-01-01T00:00:01.000+00:00",
        "nodes 8: accepted 3, baseline 1, invalid 1, neutral 1, pending 1, rejected 1",
        "rollouts 32 ($0.4200)   sessions 4 ($1.0000)",
        "baseline #1 baseline c1c1c1c1c1  dev 0.500 ± 0.100  lines 0",
        "best     #6 accepted c6c6c6c6c6  dev 0.700 ± 0.020  lines 15",
        "iteration 5 (epoch 2, steering): step candidate_evaluated, decision -, parent #1, candidate #8, stall 1",
        "recent decisions: 4:accepted (#1->#6), 3:accepted (#2->#4), 2:rejected (#2->#3), 1:accepted (#1->#2)",
    ]


def test_node(db: Path) -> None:
    doc = run_json(db, "node", "6")
    assert doc["node"] == {
        **{k: v for k, v in N6.items()}, "run_id": 1, "phase": "capability", "patch_kind": "cherry_pick",
        "origin": "cherry_pick", "status_reason": "", "batch_before": None, "batch_after": None, "hypothesis": None,
        "created_at": "2026-01-01T00:00:13.000+00:00", "dev_tasks": None,
    }  # fmt: skip
    assert doc["edge_in"] == {
        "id": 5, "run_id": 1, "parent_id": 5, "child_id": 6, "kind": "cherry_pick", "diff_sha": diff_sha(CACHE_DIFF),
        "files_changed": ["tools.py"], "lines_added": 1, "lines_removed": 0, "fixed": ["t-b", "t-c"],
        "regressed": [], "still_failing": [], "still_passing": ["t-a"], "source_edge_id": 3,
        "created_at": "2026-01-01T00:00:27.000+00:00",
    }  # fmt: skip
    assert doc["children"] == []
    assert doc["rollouts"] == {"dev": {"runs": 2, "passes": 2, "mean_score": 1.0},
                               "train": {"runs": 3, "passes": 3, "mean_score": 1.0}}  # fmt: skip
    assert doc["lessons"] == [{"id": 4, "node_id": 6, "edge_id": 5, "iteration": 4, "task_id": "t-b",
                               "category": "fixed", "attribution": "stochastic", "text": "t-b flips with the seed",
                               "created_at": "2026-01-01T00:01:27.000+00:00"}]  # fmt: skip
    assert run_json(db, "node", "2")["children"] == [3, 4]
    text = run_cli(db, "node", "2")
    assert "parent #1 via patch (+1 -0)  children #3, #4" in text
    assert 'hypothesis: {"claim": "retry tool"}' in text
    assert "rollouts train: 2/3 passed, mean score 0.667" in text


def test_edge(db: Path) -> None:
    doc = run_json(db, "edge", "2", "4")
    assert doc == {
        "edge": {"id": 3, "run_id": 1, "parent_id": 2, "child_id": 4, "kind": "patch", "diff_sha": diff_sha(CACHE_DIFF),
                 "files_changed": ["tools.py"], "lines_added": 1, "lines_removed": 0, "fixed": ["t-c"],
                 "regressed": [], "still_failing": [], "still_passing": ["t-a", "t-b"], "source_edge_id": None,
                 "created_at": "2026-01-01T00:00:23.000+00:00"},
        "diff": CACHE_DIFF,
        "lessons": [],
    }  # fmt: skip
    assert run_cli(db, "edge", "2", "4").splitlines() == [
        "edge 3: #2 -> #4  patch  +1 -0", "files: tools.py", "fixed: t-c", "regressed: -", "still_failing: -",
        "still_passing: t-a, t-b", "", *CACHE_DIFF.splitlines(),
    ]  # fmt: skip


def test_scenario(db: Path) -> None:
    doc = run_json(db, "scenario", "t-b")
    assert [(n["node_id"], n["passes"], n["runs"]) for n in doc["nodes"]] == [
        (1, 0, 1), (2, 1, 1), (3, 1, 1), (4, 1, 1), (5, 0, 1), (6, 1, 1), (8, 1, 1)]  # fmt: skip
    assert doc["nodes"][0] == {
        "node_id": 1, "commit": "c1" * 20, "status": "baseline", "iteration": 0, "passes": 0, "runs": 1,
        "outcomes": [{"split": "train", "repetition": 0, "seed": 100, "score": 0.0, "passed": False,
                      "disposition": "task_failure", "rationale": "t-b answer wrong",
                      "failure_file": "prompts/system.md"}],
    }  # fmt: skip
    assert {k: doc[k] for k in ("task_id", "task_group", "run_id")} == {
        "task_id": "t-b",
        "task_group": "b",
        "run_id": 1,
    }
    assert [(les["id"], les["attribution"]) for les in doc["lessons"]] == [(1, "true_fix"), (4, "stochastic")]
    assert [(a["edge_id"], a["parent_id"], a["child_id"], a["kind"], a["transition"], a["attribution"])
            for a in doc["attempts"]] == [(1, 1, 2, "patch", "fixed", "true_fix"),
                                          (5, 5, 6, "cherry_pick", "fixed", "stochastic")]  # fmt: skip
    assert doc["sensitive_files"] == [{"file": "tools.py", "fixed": 2, "regressed": 0, "edges": [1, 5]}]
    assert doc["failure_signatures"] == [{"signature": "prompts/system.md :: task_failure",
                                          "failure_file": "prompts/system.md", "count": 2, "nodes": [1, 5],
                                          "example": "t-b answer wrong"}]  # fmt: skip
    regressed = run_json(db, "scenario", "t-a")["attempts"]
    assert [(a["edge_id"], a["transition"], a["status"]) for a in regressed] == [(2, "regressed", "rejected")]
    text = run_cli(db, "scenario", "t-c")
    assert "#8 pending iter 5: 1/2 passed" in text
    assert "    train/rep 1 seed 101: FAIL 0.000  task_failure: t-c answer wrong [prompts/system.md]" in text
    assert text.rstrip().endswith("sensitive files: tools.py (fixed 2, regressed 0)")


def test_lessons_filters(db: Path) -> None:
    assert run_json(db, "lessons", "--attribution", "true_fix") == {"lessons": [{
        "id": 1, "run_id": 1, "node_id": None, "edge_id": 1, "iteration": 1, "task_id": "t-b", "category": "fixed",
        "attribution": "true_fix", "text": "retrying the lookup tool fixes t-b",
        "created_at": "2026-01-01T00:01:21.000+00:00"}]}  # fmt: skip
    ids = lambda *a: [les["id"] for les in run_json(db, "lessons", *a)["lessons"]]  # noqa: E731
    assert ids() == [1, 2, 3, 4, 5]
    assert ids("--task", "t-b") == [1, 4]
    assert ids("--node", "4") == [5]
    assert ids("--category", "fixed") == [1, 4]
    assert ids("--edge", "1") == [1, 3]
    assert ids("--category", "fixed", "--attribution", "stochastic") == [4]
    assert run_cli(db, "lessons", "--task", "t-a").splitlines() == [
        "1 lesson(s)", "  2. regressed/true_regression [t-a] (node #3, edge 2): loop rewrite broke t-a"]  # fmt: skip


def test_lineage_and_best(db: Path) -> None:
    doc = run_json(db, "lineage", "6")
    assert doc == {"node_id": 6, "lineage": [
        {**N1, "edge_kind": None, "origin": "baseline"}, {**N5, "edge_kind": "rebase", "origin": "rebase"},
        {**N6, "edge_kind": "cherry_pick", "origin": "cherry_pick"}]}  # fmt: skip
    assert run_cli(db, "lineage", "6").splitlines() == [
        "root -> #1 baseline c1c1c1c1c1  dev 0.500 ± 0.100  lines 0",
        "  rebase -> #5 neutral  c5c5c5c5c5  dev 0.550 ± 0.050  lines 4",
        "    cherry_pick -> #6 accepted c6c6c6c6c6  dev 0.700 ± 0.020  lines 15",
    ]
    assert run_json(db, "best") == {"best": N6, "path": [N1, N5, N6]}
    assert run_cli(db, "best").splitlines() == [
        "best: #6 accepted c6c6c6c6c6  dev 0.700 ± 0.020  lines 15", "path: #1 -> #5 -> #6"]  # fmt: skip


def test_best_is_what_the_run_recorded_not_a_second_ranking(
    tmp_path: Path, fixture_dag: Callable[[Path], dict[str, int]]
) -> None:
    """A rejected node scoring higher on dev is never named: `evo-dag best` reads the run's own choice."""
    db = tmp_path / "evodag.sqlite"
    fixture_dag(db)
    with EvoDAG(db) as s:
        s.update_node(3, dev_mean=0.99, dev_std=0.0)  # rejected
        assert s.summary()["best"]["id"] == 6
    assert run_json(db, "best")["best"]["id"] == 6
    with EvoDAG(db) as s:
        s.update_run(1, best_node_id=None)
    assert run_json(db, "best") == {"best": None, "path": []}
    assert run_cli(db, "best") == "the run has not recorded a best node yet\n"
    assert runner.invoke(app, ["best", "--split", "test", "--db", str(db)]).exit_code == 2  # no second rule


def test_batch(db: Path) -> None:
    status = lambda runs, passes, mean, s: {"runs": runs, "passes": passes, "mean_score": mean, "status": s}  # noqa: E731
    assert run_json(db, "batch") == {"run_id": 1, "iteration": ITERATION_5, "tasks": [
        {"task_id": "t-a", "parent": status(1, 1, 1.0, "pass"), "candidate": status(1, 1, 1.0, "pass")},
        {"task_id": "t-b", "parent": status(1, 0, 0.0, "fail"), "candidate": status(1, 1, 1.0, "pass")},
        {"task_id": "t-c", "parent": status(1, 0, 0.0, "fail"), "candidate": status(2, 1, 0.5, "mixed")},
    ]}  # fmt: skip
    assert run_cli(db, "batch").splitlines()[1:] == [
        "task                     parent                 candidate",
        "t-a                      pass 1/1 (1.000)       pass 1/1 (1.000)",
        "t-b                      fail 0/1 (0.000)       pass 1/1 (1.000)",
        "t-c                      fail 0/1 (0.000)       mixed 1/2 (0.500)",
    ]


def test_diff_ancestor_and_diverged(db: Path) -> None:
    assert run_json(db, "diff", "1", "4") == {"a": 1, "b": 4, "relation": "ancestor", "common_ancestor": 1,
        "segments": [{"label": "1..4", "from": 1, "to": 4, "steps": [
            step(1, 1, 2, "patch", RETRY_DIFF, ["tools.py"], 1, 0),
            step(3, 2, 4, "patch", CACHE_DIFF, ["tools.py"], 1, 0)]}]}  # fmt: skip
    assert run_json(db, "diff", "3", "6") == {"a": 3, "b": 6, "relation": "diverged", "common_ancestor": 1,
        "segments": [
            {"label": "1..3", "from": 1, "to": 3, "steps": [step(1, 1, 2, "patch", RETRY_DIFF, ["tools.py"], 1, 0),
                                                             step(2, 2, 3, "patch", LOOP_DIFF, ["loop.py"], 1, 1)]},
            {"label": "1..6", "from": 1, "to": 6, "steps": [
                step(4, 1, 5, "rebase", REBASE_DIFF, ["loop.py"], 1, 0),
                step(5, 5, 6, "cherry_pick", CACHE_DIFF, ["tools.py"], 1, 0)]},
        ]}  # fmt: skip
    text = run_cli(db, "diff", "3", "6")
    assert text.splitlines()[:3] == ["#3 vs #6: diverged, common ancestor 1", "=== 1..3 (2 edge(s))",
                                     "--- edge 1 #1 -> #2 patch"]  # fmt: skip
    assert "=== 1..6 (2 edge(s))\n--- edge 4 #1 -> #5 rebase\n" + REBASE_DIFF in text
    same = run_json(db, "diff", "4", "4")
    assert (same["relation"], same["segments"][0]["steps"]) == ("ancestor", [])


def test_export_formats(db: Path, tmp_path: Path) -> None:
    doc = json.loads(run_cli(db, "export", "--format", "json"))
    assert (doc["run_id"], [n["id"] for n in doc["nodes"]]) == (1, [1, 2, 3, 4, 5, 6, 7, 8])
    assert [(e["parent_id"], e["child_id"], e["kind"]) for e in doc["edges"]] == [
        (1, 2, "patch"), (2, 3, "patch"), (2, 4, "patch"), (1, 5, "rebase"), (5, 6, "cherry_pick"), (4, 7, "revert"),
        (1, 8, "patch")]  # fmt: skip
    out = tmp_path / "dag.graphml"
    assert run_json(db, "export", "--format", "graphml", "--out", str(out)) == {
        "format": "graphml", "out": str(out), "nodes": 8, "edges": 7}  # fmt: skip
    g = nx.read_graphml(out)
    assert (g.number_of_nodes(), g.number_of_edges(), g.nodes["6"]["status"]) == (8, 7, "accepted")
    assert json.loads(g.edges["5", "6"]["fixed"]) == ["t-b", "t-c"]
    dot = run_cli(db, "export", "--format", "dot")
    assert dot.startswith("digraph evodag {\n") and '  n5 -> n6 [label="cherry_pick"];\n' in dot
    mermaid = run_cli(db, "export", "--format", "mermaid")
    assert mermaid.splitlines()[:2] == ["graph TD", '  n1["#1 baseline dev 0.500"]']
    assert "  n4 -->|revert| n7" in mermaid
    wrapped = run_json(db, "export", "--format", "mermaid")
    assert (wrapped["format"], wrapped["content"], wrapped["nodes"], wrapped["edges"]) == ("mermaid", mermaid, 8, 7)
    assert run_cli(db, "export", "--format", "dot", "--out", str(tmp_path / "d.dot")) == (
        f"wrote dot (8 nodes, 7 edges) to {tmp_path / 'd.dot'}\n")  # fmt: skip
    assert (tmp_path / "d.dot").read_text() == dot


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["node", "42"], "evo-dag: unknown node 42; `evo-dag summary` lists nodes"),
        (["lineage", "42"], "evo-dag: unknown node 42; `evo-dag summary` lists nodes"),
        (["lessons", "--node", "42"], "evo-dag: unknown node 42; `evo-dag summary` lists nodes"),
        (["edge", "1", "7"], "evo-dag: unknown edge 1->7; `evo-dag lineage CHILD` shows the edges leading to a node"),
        (["scenario", "t-zzz"], "evo-dag: unknown task 't-zzz': no rollout or lesson mentions it"),
        (["export", "--format", "png"], "evo-dag: unknown export format 'png'; choose one of: json, graphml, dot"),
        (["lessons", "--category", "oops"], "evo-dag: invalid lesson category 'oops'; expected one of: fixed,"),
        (["lessons", "--attribution", "luck"], "evo-dag: invalid attribution 'luck'; expected one of: true_fix,"),
    ],
)
def test_errors_exit_2_with_one_line(db: Path, args: list[str], message: str) -> None:
    for extra in ([], ["--json"]):
        result = runner.invoke(app, [*args, *extra, "--db", str(db)])
        assert result.exit_code == 2
        assert result.stdout == ""
        assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_db_resolution_order(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.delenv("EVODAG_DB", raising=False)
    missing = runner.invoke(app, ["summary", "--json"])
    assert missing.exit_code == 2
    assert missing.stderr == (
        f"evo-dag: no EvoDAG database at {empty / 'evodag.sqlite'}; pass --db PATH, set EVODAG_DB, "
        "or run inside a run folder (one holding evodag.sqlite), e.g. --run DIR\n"
    )
    assert json.loads(runner.invoke(app, ["summary", "--json", "--run", str(db.parent)]).stdout)["run"]["id"] == 1
    monkeypatch.chdir(db.parent)
    assert runner.invoke(app, ["best", "--json"]).exit_code == 0
    monkeypatch.setenv("EVODAG_DB", str(tmp_path / "nowhere.sqlite"))
    assert "nowhere.sqlite" in runner.invoke(app, ["summary"]).stderr
    assert runner.invoke(app, ["summary", "--db", str(db)]).exit_code == 0


def test_corrupt_database_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "evodag.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    result = runner.invoke(app, ["summary", "--db", str(bad)])
    assert (result.exit_code, result.stdout) == (2, "")
    assert (
        result.stderr
        == f"evo-dag: {bad} is not an SQLite database (file is not a database); point --db at a run's evodag.sqlite\n"
    )


def test_sqlite_failure_is_one_line_exit_1(tmp_path: Path) -> None:
    hollow = tmp_path / "evodag.sqlite"
    conn = sqlite3.connect(hollow)
    conn.execute(f"PRAGMA user_version = {LATEST}")
    conn.close()
    result = runner.invoke(app, ["summary", "--db", str(hollow)])
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"evo-dag: {hollow}: table runs is missing; restore it from a backup, or move it away to start the run over\n"
    )


def test_empty_database(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    EvoDAG(path).close()
    result = runner.invoke(app, ["summary", "--db", str(path)])
    assert (result.exit_code, result.stderr) == (2, "evo-dag: this database has no run yet; `evo-dag summary` shows "
                                                    "the latest run\n")  # fmt: skip
    with EvoDAG(path) as s:
        s.create_run({}, 0)
    assert run_json(path, "batch") == {"run_id": 1, "iteration": None, "tasks": []}
    assert run_cli(path, "batch") == "no iteration yet\n"
    assert run_json(path, "summary")["best"] is None


def test_help_is_plain_and_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "╭" not in result.stdout
    listed = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == ["summary", "history", "node", "edge", "scenario", "lessons", "lineage", "best", "batch", "diff",
                      "graph", "progress", "query", "export"]  # fmt: skip

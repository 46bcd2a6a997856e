"""The dashboard's query layer (`evodag.dashboard`), its JSON API and server (`saddler.ui`), `saddler ui`, and
report.html: one document per view, the same for `evo-dag --json` and the page, test results only once the run
has finished."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evodag import dashboard
from evodag.cli import app as evodag_app
from evodag.store import EvoDAG
from saddler.cli.app import app as saddler_app
from saddler.reporting.html import write_report_html
from saddler.ui import page
from saddler.ui.api import RunSource, answer
from saddler.ui.server import make_server, serve_in_thread


@pytest.fixture()
def finished_run(tmp_path: Path, build_run: Callable[..., Any], open_store: Callable[[Any], Any]) -> tuple[Path, Any]:
    run_dir = tmp_path / "finished"
    run_dir.mkdir()
    store, clock = open_store(run_dir / "evodag.sqlite")
    fx = build_run(store, clock)
    store.close()
    return run_dir, fx


@pytest.fixture()
def unfinished_run(finished_run: tuple[Path, Any]) -> tuple[Path, Any]:
    """The finished fixture with its run row set back to running: test rows exist, the run has not finished."""
    run_dir, fx = finished_run
    with EvoDAG(run_dir / "evodag.sqlite") as store:
        store.update_run(fx.run_id, status="running", finished_at=None)
        store.update_node(fx.ids["N7"], test_mean=0.9, test_std=0.1)
    return run_dir, fx


def _doc(run_dir: Path, path: str) -> tuple[int, Any]:
    status, doc = answer([RunSource(run_dir)], path)
    return status, json.loads(json.dumps(doc, default=str))


def test_graph_has_one_element_per_node_and_edge_and_the_best_lineage(finished_run: tuple[Path, Any]) -> None:
    run_dir, fx = finished_run
    with EvoDAG(run_dir / "evodag.sqlite") as store:  # iteration 2's acceptance gathered two rounds of evidence
        it = store.iterations(fx.run_id)[1]
        plan = [{"tasks": ["tr-7"], "repetition": 0}, {"tasks": ["tr-8"], "repetition": 0}]
        store.update_iteration(it.id, evidence={"verdict": "reject", "plan": plan, "rounds_run": 2})
        close_call = it.candidate_id
    status, g = _doc(run_dir, "/api/0/graph")
    assert status == 200
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        assert [n["id"] for n in g["nodes"]] == [n.id for n in store.nodes()]
        assert [(e["parent_id"], e["child_id"], e["kind"]) for e in g["edges"]] == [
            (e.parent_id, e.child_id, e.kind) for e in store.edges()
        ]
        assert g["best_lineage"] == [n.id for n in store.lineage(fx.ids["N7"])]
    assert g["best_id"] == fx.ids["N7"] and g["baseline_id"] == fx.ids["N1"] and g["status"] == "finished"
    kinds = {e["kind"] for e in g["edges"]}
    assert {"patch", "rebase", "cherry_pick"} <= kinds
    history = _doc(run_dir, "/api/0/history")[1]["iterations"]
    rounds = {it["candidate_id"]: len((it["evidence"] or {}).get("rounds", [])) for it in history if it["candidate_id"]}
    assert {e["child_id"]: e["close_call_rounds"] for e in g["edges"] if e["child_id"] in rounds} == rounds
    assert rounds[close_call] == 2 and sum(rounds.values()) == 2


def test_test_results_appear_only_once_the_run_has_finished(
    finished_run: tuple[Path, Any], unfinished_run: tuple[Path, Any]
) -> None:
    run_dir, fx = unfinished_run
    best = str(fx.ids["N7"])
    for path in ("/api/0/graph", f"/api/0/node/{best}", "/api/0/summary", "/api/0/tasks"):
        text = json.dumps(_doc(run_dir, path)[1])
        assert '"test_mean": 0.9' not in text and '"split": "test"' not in text, path
    node = _doc(run_dir, f"/api/0/node/{best}")[1]
    assert "test" not in node["rollouts"] and node["node"]["test_mean"] is None
    assert {t["split"] for t in node["tasks"]} == {"train", "dev"}
    assert _doc(run_dir, "/api/0/task/te-1")[0] == 404  # a test task is unknown until the end
    with EvoDAG(run_dir / "evodag.sqlite") as store:
        store.update_run(fx.run_id, status="finished")
    node = _doc(run_dir, f"/api/0/node/{best}")[1]
    assert node["rollouts"]["test"]["runs"] == 12 and "test" in {t["split"] for t in node["tasks"]}
    assert _doc(run_dir, "/api/0/task/te-1")[0] == 200


def test_node_page_has_the_diffs_outcomes_lessons_and_sessions(finished_run: tuple[Path, Any]) -> None:
    run_dir, fx = finished_run
    n5 = fx.ids["N5"]
    status, d = _doc(run_dir, f"/api/0/node/{n5}")
    assert status == 200
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        edge = store.edge_into(n5)
        assert edge is not None
        assert d["diff"] == store.get_blob(edge.diff_sha)
        steps = [st["child_id"] for seg in d["baseline_diff"]["segments"] for st in seg["steps"]]
        assert steps == [n.id for n in store.lineage(n5)][1:]
        assert len(d["sessions"]) == len(store.sessions(fx.run_id, store.get_node(n5).iteration))
        train = {(r.task_id, r.passed) for r in store.rollouts(fx.run_id) if r.node_id == n5 and r.split == "train"}
    assert {(t["task_id"], t["passes"] == 1) for t in d["tasks"] if t["split"] == "train"} == train
    assert d["node"]["hypothesis"] and d["is_best"] is False
    assert _doc(run_dir, f"/api/0/node/{fx.ids['N1']}")[1]["baseline_diff"] is None


def test_task_page_is_the_scenario_registry(finished_run: tuple[Path, Any]) -> None:
    run_dir, _ = finished_run
    status, t = _doc(run_dir, "/api/0/task/tr-3")
    assert status == 200
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        assert t == json.loads(json.dumps(store.scenario("tr-3"), default=str))
    assert {"root_causes", "attempts", "failure_signatures", "sensitive_files", "nodes"} <= set(t)


def test_progress_follows_the_recorded_best_with_search_rollouts_and_cost(finished_run: tuple[Path, Any]) -> None:
    run_dir, fx = finished_run
    p = _doc(run_dir, "/api/0/progress")[1]["points"]
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        its = [it for it in store.iterations(fx.run_id) if it.finished_at]
        assert [pt["iteration"] for pt in p] == [it.number for it in its]
        search = [r for r in store.rollouts(fx.run_id) if r.split != "test"]
        for pt, it in zip(p, its, strict=True):
            assert pt["rollouts"] == sum(1 for r in search if r.id <= (it.last_rollout or 0))
            assert pt["best_dev"] == store.get_node(pt["best_id"]).dev_mean
    assert p[-1]["best_id"] == fx.ids["N7"] and p[-1]["best_dev"] == 1.0
    assert [pt["rollouts"] for pt in p] == sorted(pt["rollouts"] for pt in p)
    assert [pt["cost"] for pt in p] == sorted(pt["cost"] for pt in p)


@pytest.mark.parametrize("view", ["graph", "progress"])
def test_evo_dag_json_is_the_pages_document(finished_run: tuple[Path, Any], view: str) -> None:
    run_dir, _ = finished_run
    result = CliRunner().invoke(evodag_app, [view, "--run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == _doc(run_dir, f"/api/0/{view}")[1]
    text = CliRunner().invoke(evodag_app, [view, "--run", str(run_dir)])
    assert text.exit_code == 0 and text.output.strip()


def test_unknown_run_node_task_or_view_is_a_404(finished_run: tuple[Path, Any], tmp_path: Path) -> None:
    run_dir, _ = finished_run
    for path in ("/api/1/graph", "/api/x/graph", "/api/0/nope", "/api/0/node/999", "/api/0/node/abc",
                 "/api/0/task/no-such-task", "/nope", "/api/0/graph/extra"):  # fmt: skip
        status, doc = _doc(run_dir, path)
        assert status == 404 and doc["error"], path
    other = tmp_path / "other"
    other.mkdir()
    with EvoDAG(other / "evodag.sqlite") as store:  # node 1 of another store is not a node of this run
        run = store.create_run({}, 1)
        store.add_node(run.id, "a" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline")
        store.create_run({}, 2)
    assert answer([RunSource(other)], "/api/0/node/1")[0] == 404


def test_head_is_the_newest_event_and_runs_lists_each_source(finished_run: tuple[Path, Any]) -> None:
    run_dir, fx = finished_run
    head = _doc(run_dir, "/api/0/head")[1]
    with EvoDAG(run_dir / "evodag.sqlite") as store:
        assert head == {
            "run_id": fx.run_id, "last_event_id": store.events()[-1].id, "status": "finished", "schedule": None
        }  # what is in flight: only while it runs  # fmt: skip
        store.log_event("x", {}, fx.run_id)
    assert _doc(run_dir, "/api/0/head")[1]["last_event_id"] == head["last_event_id"] + 1
    runs = answer([RunSource(run_dir), RunSource(run_dir / "evodag.sqlite")], "/api/runs")[1]
    assert [(r["index"], r["label"], r["status"], r["name"]) for r in runs] == [
        (0, "finished", "finished", "fixture-run"),
        (1, "finished", "finished", "fixture-run"),
    ]


@pytest.fixture()
def served(finished_run: tuple[Path, Any]) -> Iterator[str]:
    server = make_server([RunSource(finished_run[0])], port=0)
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as res:
            return res.status, res.headers["Content-Type"], res.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def test_server_serves_the_page_its_vendored_assets_and_the_api(served: str) -> None:
    status, ctype, body = _get(served + "/")
    assert status == 200 and ctype.startswith("text/html")
    srcs = re.findall(r'(?:src|href)="([^"]+)"', body.decode())
    assert srcs and all(s.startswith(("/static/", "data:", "#")) for s in srcs)  # nothing from outside
    for src in srcs:
        if src.startswith("/static/"):
            assert _get(served + src)[0] == 200, src
    assert json.loads(_get(served + "/api/0/graph")[2])["nodes"]
    for path in ("/static/../api.py", "/static/vendor/VENDORED.md", "/static/index.html", "/elsewhere"):
        assert _get(served + path)[0] == 404, path


def test_saddler_ui_needs_a_run_that_has_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(saddler_app, ["ui", str(tmp_path)])
    assert result.exit_code == 2 and "no evodag.sqlite" in result.output


class _FakeServer:
    server_address = ("0.0.0.0", 8765)

    def serve_forever(self) -> None:
        raise KeyboardInterrupt

    def server_close(self) -> None:
        pass


def test_saddler_ui_binds_locally_and_warns_for_another_host(
    finished_run: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    bound: list[tuple[str, int]] = []

    def fake(sources: list[RunSource], host: str, port: int) -> _FakeServer:
        bound.append((host, port))
        return _FakeServer()

    monkeypatch.setattr("saddler.ui.server.make_server", fake)
    local = CliRunner().invoke(saddler_app, ["ui", str(finished_run[0])])
    assert local.exit_code == 0 and "warning" not in local.output and bound[-1] == ("127.0.0.1", 8765)
    wide = CliRunner().invoke(saddler_app, ["ui", str(finished_run[0]), "--host", "0.0.0.0", "--port", "9000"])
    assert wide.exit_code == 0 and bound[-1] == ("0.0.0.0", 9000)
    assert "warning: serving on 0.0.0.0" in wide.output and "ui: http://0.0.0.0:8765/" in wide.output


def test_report_html_is_one_file_with_every_view_inlined(finished_run: tuple[Path, Any]) -> None:
    run_dir, fx = finished_run
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        path = write_report_html(store, run_dir)
        views = dashboard.run_views(store, fx.run_id, pages=True)
        diffs = {n: views["nodes"][n]["diff"] for n in views["nodes"]}
        views = json.loads(json.dumps(page.shared_diffs(views), default=str))
    html = path.read_text(encoding="utf-8")
    assert path.name == "report.html"
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=\"(?!data:)", html)  # nothing linked
    for name in page.SCRIPTS + page.STYLES:
        assert page._text(name)[:200] in html
    blob = re.search(r'<script type="application/json" id="saddler-data">(.*?)</script>', html, re.S)
    assert blob is not None
    data = json.loads(blob.group(1))
    assert data["runs"][0]["views"] == views
    assert set(data["runs"][0]["views"]["nodes"]) == {str(i) for i in fx.ids.values()}
    steps = [st for d in views["nodes"].values() for seg in (d["baseline_diff"] or {}).get("segments", [])
             for st in seg["steps"]]  # fmt: skip
    assert steps and all("diff" not in st and st["diff_of"] == st["child_id"] for st in steps)
    assert all(diffs[str(st["child_id"])] for st in steps)  # each diff inlined once, on its node


def test_saddler_report_writes_report_html_beside_report_md(finished_run: tuple[Path, Any]) -> None:
    run_dir, _ = finished_run
    (run_dir / "saddler.toml").write_text("[run]\n", encoding="utf-8")
    result = CliRunner().invoke(saddler_app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert (run_dir / "report.md").is_file() and (run_dir / "report.html").is_file()


def test_the_runs_summary_lines_name_report_html_and_the_ui_command(tmp_path: Path) -> None:
    from saddler.run.finish import RunOutcome

    lines = RunOutcome("max_iterations", 3, None, None, 0.5, 10, tmp_path / "report.md").metric_lines()
    assert lines[-2:] == [f"report_html: {tmp_path / 'report.html'}", f"ui: saddler ui {tmp_path}"]

"""Fleet mode end to end on a small git repo: the seed's fleet.json, a bench that prints a latency line, a fake
agent making one change per call. Improvements are kept, regressions and crashes reset, results.tsv checked."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from gitrepo import git, init_commit
from typer.testing import CliRunner

from evodag.cli import app as evo_app
from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.errors import RunStateError
from saddler.modes.fleet import loop as fleet_loop
from saddler.modes.fleet import ops as fleet_ops
from saddler.modes.fleet.config import FleetPaths
from saddler.modes.fleet.loop import FleetRun, init_fleet
from saddler.modes.fleet.results import read_results
from saddler.procs import is_running
from saddler.reporting.figures import build_report
from saddler.runlock import run_lock

pytestmark = pytest.mark.slow


def test_fleet_keeps_improvements_and_resets_regressions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"stop_when.max_iterations": 6})
    root, work = tmp_path / "fleet-root", tmp_path / "my-project"
    paths = init_fleet(root, fleet_json)
    assert paths.workdir == work and paths.results == work / "results.tsv"
    lines: list[str] = []
    state = FleetRun(root, say=lines.append).run()
    assert state["status"] == "finished" and state["termination_reason"] == "max_iterations"
    rows = read_results(work / "results.tsv")
    text = (work / "results.tsv").read_text(encoding="utf-8").splitlines()
    assert text[0] == "commit\tmetric\tstatus\tdescription"
    assert [r.status for r in rows] == ["keep", "keep", "discard", "crash", "discard", "keep", "discard"]
    assert [r.description for r in rows] == [
        "baseline",
        "OPT_LEVEL 0 -> 1",
        "SLOWDOWN 0 -> 1",
        "rewrite the hot loop",
        "SLOWDOWN 0 -> 1",
        "OPT_LEVEL 1 -> 2 (technique found with WebSearch)",
        "no change: nothing worth changing",
    ]
    base, first, worse, crash, worse2, second, _ = rows
    assert 100 <= base.metric < 100.5 and 90 <= first.metric < 90.5 and 80 <= second.metric < 80.5
    assert worse.metric > first.metric and worse2.metric > first.metric and crash.metric == 0.0
    assert text[4].split("\t")[1] == "0.000000"
    # git is the state machine: only the baseline and the two improvements remain
    log = git(work, "log", "--format=%h %s").splitlines()
    assert [line.split(" ", 1)[1] for line in log] == [
        "fleet it5: OPT_LEVEL 1 -> 2 (technique found with WebSearch)",
        "agent: OPT_LEVEL 0 -> 1",
        "fleet: baseline",
    ]
    assert [line.split(" ")[0] for line in log] == [second.commit, first.commit, base.commit]
    assert "OPT_LEVEL = 2\nSLOWDOWN = 0\n" in (work / "solution.py").read_text(encoding="utf-8")
    assert git(work, "status", "--porcelain") == ""
    # plateau counted in code: 3 discards in a row -> iteration 5 got the search prompt
    heads = {n: json.loads(paths.session_log(n).read_text().splitlines()[0]) for n in range(1, 7)}
    assert [heads[n]["search"] for n in range(1, 7)] == [False, False, False, False, True, False]
    assert "WebSearch" in (root / "logs" / "prompt-iter-5.md").read_text(encoding="utf-8")
    assert "WebSearch" not in (root / "logs" / "prompt-iter-4.md").read_text(encoding="utf-8")
    with EvoDAG(root / "evodag.sqlite", readonly=True) as store:
        run = store.get_run()
        assert run.status == "finished" and run.termination_reason == "max_iterations"
        statuses = [n.status for n in store.nodes(run.id)]
        assert statuses == ["baseline", "accepted", "rejected", "invalid", "rejected", "accepted"]
        assert store.session_cost(run.id) == pytest.approx(1.5)
        assert [it.exploration for it in store.iterations(run.id)] == [False, False, False, False, True, False]
        assert [it.decision for it in store.iterations(run.id)] == [
            "accepted",
            "rejected",
            "invalid",
            "rejected",
            "accepted",
            "no_patch",
        ]
        rollouts = store.rollouts(run.id)
        assert [r.score for r in rollouts] == [r.metric for r in rows[:6]]
        assert len({r.seed for r in rollouts}) == 6  # every timed run had fresh inputs
        best = store.get_node(run.best_node_id or 0)
        assert best.commit.startswith(second.commit)
        figures = build_report(store)
        assert figures["counts"]["accepted"] == 2 and figures["counts"]["discarded"] == 2
    # the CLI status is the library's status
    res = CliRunner().invoke(app, ["fleet", "status", str(root), "--json"])
    assert res.exit_code == 0
    info = json.loads(res.output)
    assert info == json.loads(json.dumps(fleet_ops.status(FleetPaths.open(root))))
    assert info["best_metric"] == second.metric and info["trailing_discards"] == 1
    assert info["counts"] == {"keep": 3, "discard": 3, "crash": 1} and info["status"] == "finished"
    view = CliRunner().invoke(app, ["fleet", "view", str(root), "5"])
    assert view.exit_code == 0
    assert view.output.splitlines()[:4] == [
        "== session-iter-5.jsonl",
        f"[prompt] iteration 5 (search): {root / 'logs' / 'prompt-iter-5.md'}",
        '[system] {"type": "system", "subtype": "init", "model": "fake"}',
        "[assistant] Plan: improve",
    ]
    latest = CliRunner().invoke(app, ["fleet", "view", str(root), "latest"])
    assert latest.output.startswith("== session-iter-6.jsonl")
    out_md = tmp_path / "fleet-report.md"
    rep = CliRunner().invoke(app, ["fleet", "report", str(root), "--output", str(out_md)])
    assert rep.exit_code == 0 and rep.output == f"report: {out_md}\n"
    md = out_md.read_text(encoding="utf-8")
    assert "# Autoresearch fleet report: optimize-api-latency" in md
    assert f"| `{second.commit}` | {second.metric:g} | OPT_LEVEL 1 -> 2 (technique found with WebSearch) |" in md
    assert "Search prompts (plateau >= 3): 5" in md
    general = CliRunner().invoke(app, ["report", str(root), "--json"])
    assert general.exit_code == 0, general.output
    assert json.loads(general.output)["counts"]["accepted"] == 2
    summary = CliRunner().invoke(evo_app, ["summary", "--db", str(root / "evodag.sqlite"), "--json"])
    assert summary.exit_code == 0, summary.output
    assert json.loads(summary.output)["run"]["termination_reason"] == "max_iterations"


def test_cost_cap_stops_the_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"stop_when.cost_cap_usd": 0.5})
    init_fleet(tmp_path / "root", fleet_json)
    state = FleetRun(tmp_path / "root").run()
    assert state["termination_reason"] == "cost_cap" and state["iteration"] == 2
    assert len(read_results(tmp_path / "my-project" / "results.tsv")) == 3


def test_pause_waits_at_the_boundary_until_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"stop_when.max_iterations": 1})
    paths = init_fleet(tmp_path / "root", fleet_json)
    assert fleet_ops.pause(paths).startswith("pausing")
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        assert paths.read_state()["status"] == "paused"
        if len(waits) == 2:
            assert fleet_ops.resume(paths) == "resumed"  # the orchestrator (this process) is alive
            assert not paths.paused.exists()

    FleetRun(tmp_path / "root", sleep=sleep, poll_s=0.25).run()
    assert waits == [0.25, 0.25]
    with EvoDAG(paths.db, readonly=True) as store:
        kinds = [e.kind for e in store.events() if e.kind.startswith("fleet.")]
        assert kinds == ["fleet.result", "fleet.paused", "fleet.resumed", "fleet.result"]  # baseline row, 1st row
        assert len(store.iterations()) == 1


def test_kill_ends_the_fleet_processes_and_sweeps_orphans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    paths = init_fleet(tmp_path / "root", fleet_setup())
    env = {**__import__("os").environ, "SADDLER_FLEET_ROOT": str(paths.root)}
    agent = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    orphan = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        paths.agent_pid.write_text(str(agent.pid))
        result = fleet_ops.kill(paths)
        assert agent.wait(timeout=5) != 0 and orphan.wait(timeout=5) != 0
        assert bystander.poll() is None
        assert {agent.pid, orphan.pid} <= set(result["killed"]) and bystander.pid not in result["killed"]
        assert paths.read_state()["status"] == "killed" and not paths.agent_pid.exists()
    finally:
        for proc in (agent, orphan, bystander):
            proc.kill()
            proc.wait()


def test_a_results_row_the_agent_wrote_is_shown_as_such_and_never_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"stop_when.max_iterations": 2})
    monkeypatch.setenv("FAKE_FLEET_FORGE", "2")
    root = tmp_path / "fleet-root"
    paths = init_fleet(root, fleet_json)
    FleetRun(root).run()
    forged = "deadbee\t0.000000\tkeep\tp99 down to 0 ms (measured by me)"
    assert forged in paths.results.read_text(encoding="utf-8")  # the agent's row stays in the file
    measured = json.loads((root / ".orch-state.json").read_text(encoding="utf-8"))["best_metric"]
    info = fleet_ops.status(FleetPaths.open(root))
    assert info["best_metric"] == measured and 90 <= measured < 90.5
    assert info["counts"] == {"keep": 2, "discard": 1, "crash": 0}, "counts are the orchestrator's own rows"
    assert forged not in info["rows"] and info["agent_rows"] == [forged]
    text = fleet_ops.render_status(info)
    assert "not written by saddler" in text and forged in text
    md = fleet_ops.report(FleetPaths.open(root))
    kept = md.split("## Kept changes", 1)[1].split("## All experiments", 1)[0]
    assert "deadbee" not in kept and "-100" not in md
    assert "Rows saddler did not write" in md and "deadbee" in md.split("Rows saddler did not write", 1)[1]


def test_a_fleet_whose_orchestrator_died_is_stopped_not_running(
    tmp_path: Path, fleet_setup: Callable[..., Path]
) -> None:
    """The state file says what the orchestrator last wrote; with no process holding the run lock (killed -9, the
    machine rebooted) a `running` or `paused` fleet is `stopped`, as `saddler status` says of a run (before: it
    stayed `running` for ever)."""
    root = tmp_path / "fleet-root"
    paths = init_fleet(root, fleet_setup())
    assert fleet_ops.status(paths)["status"] == "initialized"
    for word in ("running", "paused"):
        paths.write_state(status=word)  # what an orchestrator killed mid-run leaves
        info = fleet_ops.status(FleetPaths.open(root))
        assert (info["status"], info["running"]) == ("stopped", False)
        assert fleet_ops.render_status(info).startswith(f"fleet {info['fleet']}: stopped (not running)")
    with run_lock(root):  # an orchestrator holds it: what it wrote stands
        assert fleet_ops.status(paths)["status"] == "paused"


def test_dirty_workdir_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup()
    work = tmp_path / "my-project"
    init_commit(work, "x")
    (work / "solution.py").write_text("# local edit\n")
    with pytest.raises(RunStateError, match="uncommitted changes"):
        init_fleet(tmp_path / "root", fleet_json)


def test_cli_init_json_and_broken_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"problem.metric_regex": "^nothing: ([0-9]+)"})
    res = CliRunner().invoke(app, ["fleet", "init", str(tmp_path / "root"), "--from-fleet", str(fleet_json), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == {
        "root": str(tmp_path / "root"),
        "workdir": str(tmp_path / "my-project"),
        "eval_command": "make benchmark",
        "metric_regex": "^nothing: ([0-9]+)",
        "detected": {},
        "results": str(tmp_path / "my-project" / "results.tsv"),
        "protected": ["Makefile", "bench.py"],
        "notes": [],
        "warnings": [],
    }
    (tmp_path / "my-project" / "program.md").write_text("# autoresearch\nMake one change.\n")
    git(tmp_path / "my-project", "commit", "-qam", "p")
    again = CliRunner().invoke(app, ["fleet", "init", str(tmp_path / "root"), "--from-fleet", str(fleet_json)])
    assert again.exit_code == 0 and "does not say NEVER STOP" in again.output
    run = CliRunner().invoke(app, ["fleet", "run", str(tmp_path / "root")])
    assert run.exit_code == 1 and "fails on the baseline (no match for metric_regex)" in run.output


def test_saddler_init_from_fleet_is_fleet_init(tmp_path: Path, fleet_setup: Callable[..., Path]) -> None:
    """One way to create a fleet: `saddler init --from-fleet` is `saddler fleet init --from-fleet` (before, it took
    its own path and said none of what fleet init says: the protected paths, the notes, program.md's warnings)."""
    outputs = []
    for name, command in (("a", ["init"]), ("b", ["fleet", "init"])):
        base = tmp_path / name
        base.mkdir()
        fleet_json = fleet_setup(base)
        (base / "my-project" / "program.md").write_text("# autoresearch\nMake one change.\n")  # no NEVER STOP
        res = CliRunner().invoke(app, [*command, str(base / "root"), "--from-fleet", str(fleet_json)])
        assert res.exit_code == 0, res.output
        outputs.append(res.output.replace(str(base), "BASE"))
    assert outputs[0] == outputs[1]
    assert "does not say NEVER STOP" in outputs[0] and "protected  Makefile, bench.py" in outputs[0], outputs[0]


def test_a_killed_fleet_recovers_on_the_best_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"stop_when.max_iterations": 3})
    root, work = tmp_path / "root", tmp_path / "my-project"
    init_fleet(root, fleet_json)
    real_eval = FleetRun._eval

    def dying_eval(self: FleetRun, iteration: int) -> object:
        if iteration == 2:
            raise KeyboardInterrupt  # killed after the agent's change was committed, before its evaluation
        return real_eval(self, iteration)

    monkeypatch.setattr(FleetRun, "_eval", dying_eval)
    with pytest.raises(KeyboardInterrupt):
        FleetRun(root).run()
    assert "SLOWDOWN = 1" in (work / "solution.py").read_text()  # the unevaluated experiment is still checked out
    monkeypatch.setattr(FleetRun, "_eval", real_eval)
    state = FleetRun(root).run()
    assert state["termination_reason"] == "max_iterations"
    rows = read_results(work / "results.tsv")
    assert [(r.status, r.description) for r in rows] == [
        ("keep", "baseline"),
        ("keep", "OPT_LEVEL 0 -> 1"),
        ("crash", "interrupted experiment 2 (its unfinished changes were reset)"),
        ("crash", "rewrite the hot loop"),
    ]
    assert "OPT_LEVEL = 1\nSLOWDOWN = 0\n" in (work / "solution.py").read_text()
    assert git(work, "status", "--porcelain") == ""
    with EvoDAG(root / "evodag.sqlite", readonly=True) as store:
        assert [n.status for n in store.nodes()] == ["baseline", "accepted", "invalid", "invalid"]
        assert [e.kind for e in store.events() if e.kind == "fleet.recovered"] == ["fleet.recovered"]


def test_dry_run_and_follow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]) -> None:
    root = tmp_path / "root"
    init_fleet(root, fleet_setup())
    res = CliRunner().invoke(app, ["fleet", "run", str(root), "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    assert plan["iteration"] == 1 and plan["search"] is False
    assert plan["argv"] == [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "sonnet",
        "--fallback-model",
        "haiku",
        "--max-budget-usd",
        "2",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash,Read,Edit,Write,Glob,Grep,WebSearch,WebFetch",
    ]
    assert plan["stdin"] == str(root / "logs" / "prompt-iter-1.md")  # the prompt goes by file
    assert "Goal: minimize the metric printed by `make benchmark`" in plan["prompt"]
    assert "**NEVER STOP.**" in plan["prompt"]  # program.md, read from the workdir
    assert not (tmp_path / "my-project" / "results.tsv").read_text().splitlines()[1:]  # nothing ran
    paths = FleetPaths.open(root)
    paths.session_log(1).write_text(
        json.dumps({"type": "saddler.prompt", "iteration": 1, "search": False, "prompt_file": "p.md"})
        + "\n"
        + json.dumps({"type": "text", "text": "working"})
        + "\n"
    )
    seen: list[str] = []
    fleet_ops.follow(paths, "1", seen.append, sleep=lambda _s: None, idle_limit=2)
    assert seen == ["== session-iter-1.jsonl", "[prompt] iteration 1: p.md", "working",
                    "(the fleet is not running: no more events will come)"]  # fmt: skip
    with paths.session_log(1).open("a") as fh:
        fh.write(json.dumps({"type": "saddler.exit", "returncode": 0, "timed_out": False, "stderr": ""}) + "\n")
    res = CliRunner().invoke(app, ["fleet", "view", str(root), "latest", "--follow"])
    assert res.output.splitlines() == [
        "== session-iter-1.jsonl",
        "[prompt] iteration 1: p.md",
        "working",
        "[exit] code 0 ",
    ]


def test_kill_reports_the_agent_even_when_the_orchestrators_own_shutdown_ended_it_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    # on SIGTERM the orchestrator ends its agent itself; on a loaded machine that can happen before the kill's own
    # clean-up looks, and the agent the kill stopped must still be reported (a race CI met)
    paths = init_fleet(tmp_path / "root", fleet_setup())
    agent = subprocess.Popen(["sleep", "60"], start_new_session=True)
    paths.agent_pid.write_text(str(agent.pid))

    class ShutdownFirst:
        def kill(self, grace_s: float, *, then: Callable[[], list[int]], pid: int | None) -> list[int]:
            agent.terminate()  # what the orchestrator's SIGTERM handler does to its agent
            agent.wait(timeout=5)
            return then()

    monkeypatch.setattr(fleet_ops, "controls", lambda _paths: ShutdownFirst())
    try:
        assert agent.pid in fleet_ops.kill(paths)["killed"]
        assert paths.read_state()["status"] == "killed" and not paths.agent_pid.exists()
    finally:
        agent.kill()
        agent.wait()


def test_detached_fleet_is_killed_then_resumed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fleet_setup: Callable[..., Path],
    wait_until: Callable[..., bool],
) -> None:
    root, work = tmp_path / "root", tmp_path / "my-project"
    init_fleet(root, fleet_setup(**{"stop_when.max_iterations": 3}))
    monkeypatch.setenv("FAKE_FLEET_HANG", "2")
    res = CliRunner().invoke(app, ["fleet", "run", str(root), "--detach"])
    assert res.exit_code == 0 and res.output.startswith("started in the background (pid ")
    paths = FleetPaths.open(root)
    assert wait_until(lambda: paths.agent_pid.exists() and paths.read_state().get("iteration") == 2), "timed out"
    assert wait_until(lambda: "thinking hard" in paths.session_log(2).read_text()), "not streamed while it runs"
    orchestrator, agent = int(paths.pid.read_text()), int(paths.agent_pid.read_text())
    assert fleet_ops.status(paths)["running"] is True
    killed = CliRunner().invoke(app, ["fleet", "kill", str(root)])
    assert killed.exit_code == 0 and {orchestrator, agent} <= set(json.loads(killed.output)["killed"])
    assert wait_until(lambda: not is_running(orchestrator)), "timed out"  # gone, or a zombie
    assert fleet_ops.status(paths)["status"] == "killed" and fleet_ops.status(paths)["running"] is False
    monkeypatch.delenv("FAKE_FLEET_HANG")
    state = FleetRun(root).run()  # picks up after the kill
    assert state["termination_reason"] == "max_iterations"
    assert [r.status for r in read_results(work / "results.tsv")] == ["keep", "keep", "crash", "crash"]
    assert git(work, "status", "--porcelain") == ""


def test_a_kill_between_the_store_and_results_tsv_loses_no_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"stop_when.max_iterations": 3})
    reference_root, killed_root = tmp_path / "reference", tmp_path / "killed"
    init_fleet(reference_root, fleet_json)
    FleetRun(reference_root).run()
    expected = (tmp_path / "my-project" / "results.tsv").read_text(encoding="utf-8")
    shutil.rmtree(tmp_path / "my-project")
    shutil.rmtree(tmp_path / "bin")
    fleet_json = fleet_setup(**{"stop_when.max_iterations": 3})
    init_fleet(killed_root, fleet_json)
    real_append = fleet_loop.tsv.append_result
    calls = {"n": 0}

    def dying_append(path: Path, row: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # baseline, iteration 1, then iteration 2: killed after the store recorded it
            raise KeyboardInterrupt
        real_append(path, row)  # type: ignore[arg-type]

    monkeypatch.setattr(fleet_loop.tsv, "append_result", dying_append)
    with pytest.raises(KeyboardInterrupt):
        FleetRun(killed_root).run()
    monkeypatch.setattr(fleet_loop.tsv, "append_result", real_append)
    FleetRun(killed_root).run()
    got = (tmp_path / "my-project" / "results.tsv").read_text(encoding="utf-8")
    assert [line.split("\t")[2:] for line in got.splitlines()] == [
        line.split("\t")[2:] for line in expected.splitlines()
    ]


def test_follow_waits_for_whole_lines_and_ends_when_no_orchestrator_runs(
    tmp_path: Path, fleet_setup: Callable[..., Path]
) -> None:
    """An agent mid-write leaves half a JSON line: it is printed once complete, never parsed half. A session whose
    orchestrator died (no `saddler.exit` will come) ends the follow instead of polling forever."""
    root = tmp_path / "root"
    init_fleet(root, fleet_setup())
    paths = FleetPaths.open(root)
    log = paths.session_log(1)
    log.write_text(json.dumps({"type": "text", "text": "one"}) + "\n" + '{"type": "text", "te')
    seen: list[str] = []
    polls: list[float] = []

    def sleep(_s: float) -> None:
        polls.append(_s)
        if len(polls) == 1:
            with log.open("a") as fh:
                fh.write('xt": "two"}\nnot json at all\n')

    fleet_ops.follow(paths, "1", seen.append, sleep=sleep)  # no lock holder: nothing runs the fleet
    assert seen == ["== session-iter-1.jsonl", "one", "two", "not json at all",
                    "(the fleet is not running: no more events will come)"]  # fmt: skip

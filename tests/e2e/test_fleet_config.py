"""fleet.json as the 002 seed writes it, read strictly: unknown keys and a metric_regex without its one capture
group are init errors with the dotted path (not a traceback after a paid agent session); init leaves the
user's fleet.json as it is and keeps what it found (eval command, metric_regex, protected paths) beside it;
a detected benchmark printing `name: value` gets its metric_regex; `yarn test` is detected."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from repo_paths import FIXTURES
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.errors import ConfigError
from saddler.files import atomic_path
from saddler.modes.fleet.config import RESOLVED, FleetPaths, parse_fleet
from saddler.modes.fleet.detect import Detection, detect_eval_command
from saddler.modes.fleet.loop import FleetRun, init_fleet
from saddler.modes.fleet.results import read_results

FIXTURE = FIXTURES / "fleet"  # the fixture fleet data (read, never written)
pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("regex", "why"),
    [
        (r"^p99_latency_ms:\s*([0-9.]+", "invalid regular expression"),
        (r"^p99_latency_ms:\s*[0-9.]+", "exactly one capture group (the metric), found 0"),
        (r"^(p99)_latency_ms:\s*([0-9.]+)", "exactly one capture group (the metric), found 2"),
    ],
)
def test_metric_regex_is_checked_at_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, regex: str, why: str, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"problem.metric_regex": regex})
    res = CliRunner().invoke(app, ["fleet", "init", str(tmp_path / "root"), "--from-fleet", str(fleet_json)])
    assert res.exit_code == 2, res.output
    assert "problem.metric_regex" in res.output and why in res.output
    assert "Traceback" not in res.output and not (tmp_path / "root" / "evodag.sqlite").exists()


def test_a_regex_broken_after_init_stops_the_run_before_any_agent_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    root = tmp_path / "root"
    init_fleet(root, fleet_setup())
    data = json.loads((root / "fleet.json").read_text(encoding="utf-8"))
    data["problem"]["metric_regex"] = "^p99_latency_ms: ([0-9.]+"
    (root / "fleet.json").write_text(json.dumps(data), encoding="utf-8")
    res = CliRunner().invoke(app, ["fleet", "run", str(root)])
    assert res.exit_code == 2 and "problem.metric_regex: invalid regular expression" in res.output
    assert not list((root / "logs").glob("session-iter-*.jsonl"))


def test_unknown_keys_are_errors_with_their_dotted_path() -> None:
    with pytest.raises(ConfigError) as err:
        parse_fleet(
            {
                "problem": {"eval_command": "make benchmark", "metric_regx": "^x: ([0-9]+)"},
                "stop_when": {"max_iteration": 3},
                "serach": {"enabled": False},
            },
            "fleet.json",
        )
    text = str(err.value)
    assert "fleet.json: 3 error(s)" in text
    assert "problem.metric_regx: unknown key (did you mean 'metric_regex'?)" in text
    assert "stop_when.max_iteration: unknown key (did you mean 'max_iterations'?)" in text
    assert "serach: unknown key (did you mean 'search'?)" in text


def test_init_leaves_the_users_fleet_json_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    """The seed's layout: fleet.json in the fleet root, the workdir beside it, named relatively."""
    fleet_setup(**{"problem.eval_command": None, "problem.metric_regex": None})
    root = tmp_path / "fleet-root"
    root.mkdir()
    data = json.loads((FIXTURE / "fleet.json").read_text(encoding="utf-8"))
    data["problem"]["workdir"] = "../my-project"
    for key in ("eval_command", "metric_regex"):
        del data["problem"][key]
    text = json.dumps(data, indent=4) + "\n"
    (root / "fleet.json").write_text(text, encoding="utf-8")
    paths = init_fleet(root, root / "fleet.json")
    assert (root / "fleet.json").read_text(encoding="utf-8") == text  # not rewritten
    assert paths.workdir == tmp_path / "my-project"
    again = FleetPaths.open(root)
    assert again.workdir == tmp_path / "my-project"
    assert again.spec.problem.eval_command == "make benchmark"  # what init found, kept beside fleet.json
    # from a fleet.json elsewhere: a verbatim copy, its relative workdir still meaning the same folder
    elsewhere = tmp_path / "configs" / "fleet.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(text.replace("../my-project", "../my-project/"), encoding="utf-8")
    other = init_fleet(tmp_path / "root2", elsewhere)
    assert (tmp_path / "root2" / "fleet.json").read_bytes() == elsewhere.read_bytes()
    assert other.workdir == tmp_path / "my-project" and FleetPaths.open(tmp_path / "root2").workdir == other.workdir


def test_a_detected_benchmark_printing_name_value_gets_its_metric_regex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(
        **{"problem.eval_command": None, "problem.metric_regex": None, "stop_when.max_iterations": 1},
    )
    res = CliRunner().invoke(app, ["fleet", "init", str(tmp_path / "root"), "--from-fleet", str(fleet_json), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["eval_command"] == "make benchmark"
    assert info["metric_regex"] == r"^p99_latency_ms\s*:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    assert info["detected"] == {
        "eval_command": "Makefile target benchmark",
        "metric_regex": "the benchmark's output line `p99_latency_ms: ...` (of 2 `name: value` lines)",
    }
    FleetRun(tmp_path / "root").run()
    rows = read_results(tmp_path / "my-project" / "results.tsv")
    assert 100 <= rows[0].metric < 100.5 and 90 <= rows[1].metric < 90.5  # the p99 line, not `requests: 100`


def test_yarn_test_is_detected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "web"
    work.mkdir()
    (work / "package.json").write_text(json.dumps({"scripts": {"test": "node score.js", "lint": "eslint ."}}))
    assert detect_eval_command(work) == Detection("npm test", "package.json script test")
    (work / "yarn.lock").write_text("")
    assert detect_eval_command(work) == Detection("yarn test", "package.json script test")
    (work / "package.json").write_text(json.dumps({"scripts": {"test": "node score.js", "bench": "node b.js"}}))
    assert detect_eval_command(work) == Detection("yarn bench", "package.json script bench")
    (work / "package.json").write_text(json.dumps({"scripts": {"test": "node score.js"}}))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "yarn").write_text(f"#!{sys.executable}\nprint('PASS suite\\npass_rate: 0.75\\nduration_s: 1.2')\n")
    (bindir / "yarn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    fleet_json = tmp_path / "fleet.json"
    fleet_json.write_text(json.dumps({"problem": {"workdir": "web", "metric_direction": "maximize"}}))
    paths = init_fleet(tmp_path / "root", fleet_json)
    assert paths.spec.problem.eval_command == "yarn test"
    assert paths.spec.problem.metric_regex.startswith(r"^pass_rate\s*:\s*(")  # maximize: the rate, not the time


def test_run_on_an_uninitialised_root_says_to_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup()
    root = tmp_path / "root"
    root.mkdir()
    for command in (["run", str(root)], ["status", str(root)]):
        res = CliRunner().invoke(app, ["fleet", *command])
        assert res.exit_code == 1 and f"saddler fleet init {root} --from-fleet fleet.json" in res.output, res.output
    shutil.copyfile(fleet_json, root / "fleet.json")  # the seed's layout, not initialised yet
    res = CliRunner().invoke(app, ["fleet", "run", str(root)])
    assert res.exit_code == 1 and "is not initialised" in res.output and "Traceback" not in res.output


def test_budget_turns_and_fallback_reach_every_provider(tmp_path: Path) -> None:
    from saddler.modes.fleet.agent import agent_argv, provider_notes

    settings = {"budget_per_iter": 0.5, "max_turns": 7, "fallback_model": "haiku"}
    claude, _ = agent_argv(FleetPaths(tmp_path, parse_fleet({"config": settings}, "f")), "P", tmp_path / "p.md")
    assert claude[claude.index("--fallback-model") + 1] == "haiku" and "--max-turns" in claude
    for provider in ("codex", "pi"):
        spec = parse_fleet({"config": {**settings, "provider": provider}}, "f")
        argv, _ = agent_argv(FleetPaths(tmp_path, spec), "P", tmp_path / "p.md")
        assert argv[argv.index("--model") + 1] == "sonnet"
    assert provider_notes(parse_fleet({"config": {**settings, "provider": "codex"}}, "f").config) == [
        "codex exec has no budget, turn-limit or fallback-model option: saddler stops a session at "
        "config.max_turns turns (each command, patch and message of an exec is one), config.budget_per_iter is "
        "ignored (codex reports tokens, not dollars), and a failed session is retried once with "
        "config.fallback_model",
    ]
    assert provider_notes(parse_fleet({"config": {**settings, "provider": "pi"}}, "f").config) == [
        "pi has no budget, turn-limit or fallback-model option: saddler stops a session when its streamed "
        "cost passes config.budget_per_iter or its turns pass config.max_turns, and retries a failed session "
        "once with config.fallback_model",
    ]
    assert provider_notes(parse_fleet({"config": settings}, "f").config) == []


FAKE_PI = """#!{python}
import json, sys, time
for i in range(10):  # one assistant message (a turn) costing $0.30 every 0.2 s, never done by itself
    usage = {{"input": 10, "output": 5, "cost": {{"total": 0.3}}}}
    print(json.dumps({{"type": "message_end", "message": {{"role": "assistant", "usage": usage}}}}), flush=True)
    time.sleep(0.2)
time.sleep(60)
"""
FAKE_CODEX = """#!{python}
import json, pathlib, sys
model = sys.argv[sys.argv.index("--model") + 1]
if model != "haiku":
    print(json.dumps({{"type": "error", "message": f"model {{model}} is overloaded"}}))
    sys.exit(1)
p = pathlib.Path("solution.py")
p.write_text(p.read_text().replace("OPT_LEVEL = 0", "OPT_LEVEL = 1"))
print(json.dumps({{"type": "item.completed", "item": {{"type": "agent_message", "text": "DESCRIPTION: opt level 1"}}}}))
print(json.dumps({{"type": "turn.completed", "usage": {{"input_tokens": 10, "output_tokens": 5}}}}))
"""


def _install(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / "bin" / name
    path.write_text(text.format(python=sys.executable), encoding="utf-8")
    path.chmod(0o755)


def test_pi_sessions_stop_at_the_budget_and_turn_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    for limits, stopped, turns in (
        ({"config.budget_per_iter": 0.5}, "budget_per_iter", 2),
        ({"config.max_turns": 3}, "max_turns", 3),
    ):
        case = tmp_path / stopped
        case.mkdir()
        changes = {"config.provider": "pi", "config.timeout_s": 30, "stop_when.max_iterations": 1, **limits}
        fleet_json = fleet_setup(case, **changes)
        _install(case, "pi", FAKE_PI)
        paths = init_fleet(case / "root", fleet_json)
        FleetRun(paths.root).run()
        events = [json.loads(line) for line in paths.session_log(1).read_text().splitlines()]
        assert events[-1]["type"] == "saddler.exit" and events[-1]["stopped"] == stopped
        assert sum(e.get("type") == "message_end" for e in events) == turns
        with EvoDAG(paths.db, readonly=True) as store:
            session = store.sessions()[0]
            assert session.outcome == f"stopped:{stopped}" and session.turns == turns


def test_codex_falls_back_to_the_fallback_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"config.provider": "codex", "stop_when.max_iterations": 1})
    _install(tmp_path, "codex", FAKE_CODEX)
    paths = init_fleet(tmp_path / "root", fleet_json)
    lines: list[str] = []
    FleetRun(paths.root, say=lines.append).run()
    rows = read_results(tmp_path / "my-project" / "results.tsv")
    assert [(r.status, r.description) for r in rows] == [("keep", "baseline"), ("keep", "opt level 1")]
    assert "iter 1: the sonnet session failed (model sonnet is overloaded); retrying with fallback_model haiku" in lines
    with EvoDAG(paths.db, readonly=True) as store:
        sessions = [(s.model, s.outcome, s.error) for s in store.sessions()]
        assert sessions == [("sonnet", "failed:transient", "model sonnet is overloaded"), ("haiku", "exit_0", "")]
    prompts = [json.loads(x) for x in paths.session_log(1).read_text().splitlines() if '"saddler.prompt"' in x]
    assert [p["model"] for p in prompts] == ["sonnet", "haiku"]


def test_a_root_inside_the_workdir_keeps_a_half_written_init_file_out_of_git(
    tmp_path: Path, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup()
    work = tmp_path / "my-project"
    init_fleet(work / "fleet", fleet_json)
    with pytest.raises(KeyboardInterrupt), atomic_path(work / "fleet" / RESOLVED) as tmp:
        raise KeyboardInterrupt
    tmp.write_text("{", encoding="utf-8")  # what a kill between the write and the rename leaves
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "-uall"], cwd=work, capture_output=True, text=True
    )
    assert f"!! fleet/{tmp.name}" in status.stdout.splitlines()

"""The Inspect AI adapter: an Inspect task's samples as saddler tasks, one sample per rollout with the harness's
solver, the Inspect log as the trace; offline with Inspect's mockllm model."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from gitrepo import init_commit
from repo_paths import FIXTURES, METRIC_AGENT
from typer.testing import CliRunner

from benchmarks.inspect import inspect_installed
from saddler.cli.app import app
from saddler.errors import ConfigError

pytestmark = pytest.mark.skipif(
    not inspect_installed(), reason="needs inspect-ai: pip install 'saddler[inspect]' (scripts/test.sh installs it)"
)
FIXTURE = FIXTURES / "inspect_arith"
AGENT = METRIC_AGENT
TASK = f"{FIXTURE / 'arith_task.py'}@arith"


def _bench(**options: object):  # type: ignore[no-untyped-def]
    from benchmarks.inspect import InspectBenchmark

    return InspectBenchmark(**{"task": TASK, "model": "mockllm/model", "solver": "solver.py@arith_solver", **options})


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE / "harness", tmp_path / "harness"))


def test_samples_become_tasks_split_by_metadata_or_by_a_hash_of_their_group() -> None:
    bench = _bench()
    assert [t.id for t in bench.tasks("dev")] == ["add-3", "mul-3", "sub-3"]
    train = bench.tasks("train")
    assert len(train) == 6 and {t.family for t in train} == {"add", "mul", "sub"}
    assert train[0].prompt == "What is 2 + 3?" and train[0].group == "add-1"
    hashed = _bench(split_field="nope", split_ratios=[1, 1, 1])
    ids = {s: [t.id for t in hashed.tasks(s)] for s in ("train", "dev", "test")}
    assert sorted(i for v in ids.values() for i in v) == sorted(t.id for s in ("train", "dev", "test")
                                                                  for t in bench.tasks(s))  # fmt: skip
    assert ids == {s: [t.id for t in _bench(split_field="nope", split_ratios=[1, 1, 1]).tasks(s)] for s in ids}


def test_bad_options_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="absolute path"):
        _bench(task="arith_task.py@arith")
    with pytest.raises(ConfigError, match=r"benchmark_options\.model"):
        _bench(model="")
    with pytest.raises(ConfigError, match=r"FILE\.py@factory"):
        _bench(solver="agent")
    with pytest.raises(ConfigError, match="mock_outputs"):
        _bench(mock_outputs="not a list")
    with pytest.raises(ConfigError, match="name one task"):
        _bench(task=f"{FIXTURE / 'arith_task.py'}@nope").tasks("train")
    assert _bench(model="anthropic/claude-sonnet-4-5").check() in ([], [
        "model anthropic/claude-sonnet-4-5 needs ANTHROPIC_API_KEY: export it and list it in executor.env_allow "
        "(rollouts get only allow-listed variables)"])  # fmt: skip


def test_a_rollout_scores_one_sample_with_the_harness_solver_and_keeps_the_log(harness: Path, tmp_path: Path) -> None:
    bench = _bench(mock_outputs=["I think it is 7"])
    add, mul = bench.tasks("train")[0], bench.tasks("train")[1]
    ok = bench.run(harness, add, 5, tmp_path / "t-add")
    assert (ok.score, ok.passed, ok.disposition, ok.llm_calls) == (1.0, True, "success", 1)
    bad = bench.run(harness, mul, 5, tmp_path / "t-mul")
    assert (bad.score, bad.passed, bad.disposition) == (0.0, False, "task_failure")
    assert bad.rationale.startswith("match = 'I'; answer '7', target '24'"), bad.rationale
    transcript = Path(bad.trace_path or "").read_text()
    assert "## Input\n\nWhat is 4 * 6?" in transcript and "I think it is 7" in transcript
    assert len(list((tmp_path / "t-mul").glob("*.eval"))) == 1


def test_a_broken_harness_is_a_failed_rollout_not_an_exception(harness: Path, tmp_path: Path) -> None:
    bench = _bench()
    task = bench.tasks("train")[0]
    (harness / "skills.py").write_text("def compute(question):\n    raise ValueError('broken skill')\n")
    raised = bench.run(harness, task, 1, tmp_path / "raised")
    assert (raised.disposition, raised.failure_file) == ("task_failure", "solver.py")
    assert "broken skill" in raised.error_tail
    (harness / "solver.py").unlink()
    missing = bench.run(harness, task, 1, tmp_path / "missing")
    assert (missing.disposition, missing.failure_file) == ("task_failure", "solver.py")
    assert "the harness has no solver.py" in missing.error_tail


def _git_harness(root: Path) -> Path:
    shutil.copytree(FIXTURE / "harness", root)
    init_commit(root, branch="main")
    return root


@pytest.mark.slow
def test_an_inspect_task_optimizes_end_to_end_offline(tmp_path: Path) -> None:
    harness = _git_harness(tmp_path / "arith-harness")
    command = f"{sys.executable} {AGENT} {tmp_path / 'agent-state'} add+mul,add+mul+sub skills.txt {{prompt_file}}"
    sets = {
        "benchmark_options.task": json.dumps(TASK), "benchmark_options.model": '"mockllm/model"',
        "benchmark_options.solver": '"solver.py@arith_solver"', "sessions.command": json.dumps(command),
        "loop.max_iterations": "2", "loop.batch_size": "6", "loop.test_runs": "1", "policies.evolution": '"continue"',
        "policies.phases": '"none"', "executor.workers": "2", "executor.timeout_s": "120",
    }  # fmt: skip
    run_dir = tmp_path / "run"
    args = ["init", str(run_dir), "--harness", str(harness), "--benchmark", "inspect", "--backend", "command"]
    runner = CliRunner()
    init = runner.invoke(app, [*args, *(x for k, v in sets.items() for x in ("--set", f"{k}={v}"))])
    assert init.exit_code == 0, init.output
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["baseline_test"] == [pytest.approx(1 / 3), 0.0]  # only addition
    assert summary["best_test"] == [1.0, 0.0] and summary["best_dev"] == 1.0
    assert summary["score"] == "mean_score"
    db = sqlite3.connect(run_dir / "evodag.sqlite")
    searched = "SELECT status FROM nodes WHERE origin != 'minimize' ORDER BY id"  # minimization's cuts come after
    statuses = [s for (s,) in db.execute(searched)]
    assert statuses == ["baseline", "accepted", "accepted"]
    rows = db.execute("SELECT trace_path, duration_s, disposition FROM rollouts").fetchall()
    assert all(d in ("success", "task_failure") for _, _, d in rows), rows
    assert all(p.endswith("transcript.md") and Path(p).is_file() for p, _, _ in rows)
    prompt = (run_dir / "sessions" / "1-diagnosis_patch.prompt.md").read_text()
    assert "Trace format (as the benchmark describes it): transcript.md (markdown)" in prompt
    assert "/traces/n1/train/mul-1-r0-s" in prompt  # evidence points at each rollout's own trace
    durations = sorted(d for _, d, _ in rows)
    print(f"inspect rollouts: {len(rows)}, median {durations[len(durations) // 2]:.2f}s, max {durations[-1]:.2f}s")


def test_the_inspect_agent_template_runs_a_react_loop_with_its_tools_offline(tmp_path: Path) -> None:
    from saddler.benchmark import load_benchmark
    from saddler.config import load_run_config

    replies = (
        '[{tool = "lookup_unit", arguments = {unit = "dozen"}}, '
        '{tool = "calculator", arguments = {expression = "3 * 12 * 7"}}, '
        '{tool = "submit", arguments = {answer = "252"}}]'
    )
    sets = ['benchmark_options.model="mockllm/model"', f"benchmark_options.mock_outputs={replies}"]
    args = ["init", str(tmp_path / "run"), "--template", "inspect_agent", *(x for s in sets for x in ("--set", s))]
    init = CliRunner().invoke(app, args)
    assert init.exit_code == 0, init.output
    cfg = load_run_config(tmp_path / "run")
    assert cfg.benchmark == "inspect" and "ANTHROPIC_API_KEY" in cfg.executor.env_allow
    assert (
        cfg.benchmark_options["task"]
        == f"{(tmp_path / 'run' / 'harness').resolve()}/eval/word_problems.py@word_problems"
    )
    bench = load_benchmark(cfg.benchmark, cfg.benchmark_options)
    assert [len(bench.tasks(s)) for s in ("train", "dev", "test")] == [8, 4, 4]
    task = bench.tasks("train")[0]
    assert task.id == "eggs-1"
    out = bench.run(tmp_path / "run" / "harness", task, 0, tmp_path / "trace")
    assert (out.passed, out.disposition, out.llm_calls) == (True, "success", 3), out.error_tail
    transcript = Path(out.trace_path or "").read_text()
    assert "- tool call `calculator`(expression='3 * 12 * 7')" in transcript and "\n252\n" in transcript


@pytest.mark.slow
def test_an_inspect_task_reaches_an_openai_compatible_server_on_localhost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rollouts that call a model need the network: `init` sets it (and passes the key and base URL), `validate`
    refuses it turned off, and the run's rollouts reach the model instead of hanging until the timeout."""
    from openai_server import OpenAICompatibleServer

    harness = _git_harness(tmp_path / "arith-harness")
    command = f"{sys.executable} {AGENT} {tmp_path / 'agent-state'} add+mul+sub skills.txt {{prompt_file}}"
    sets = {
        "benchmark_options.task": json.dumps(TASK), "benchmark_options.model": '"openai/test-model"',
        "benchmark_options.model_args": "{responses_api = false}",
        "benchmark_options.solver": '"solver.py@arith_solver"', "sessions.command": json.dumps(command),
        "loop.max_iterations": "1", "loop.batch_size": "6", "loop.test_runs": "1", "policies.evolution": '"continue"',
        "policies.phases": '"none"', "executor.workers": "2", "executor.timeout_s": "120",
    }  # fmt: skip
    runner = CliRunner()
    with OpenAICompatibleServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        args = ["init", "--harness", str(harness), "--benchmark", "inspect", "--backend", "command"]
        flags = [x for k, v in sets.items() for x in ("--set", f"{k}={v}")]
        off = runner.invoke(app, [args[0], str(tmp_path / "off"), *args[1:], *flags, "--set", "executor.network=false"])
        assert off.exit_code == 2
        assert (
            "run.executor.network: the benchmark's rollouts call the network (the task model openai/test-model is "
            "called from each rollout); with executor.network = false they hang until executor.timeout_s: set "
            "executor.network = true"
        ) in off.output
        init = runner.invoke(app, [args[0], str(tmp_path / "run"), *args[1:], *flags])
        assert init.exit_code == 0, init.output
        assert (
            "set executor.network = true; executor.env_allow += OPENAI_API_KEY, OPENAI_BASE_URL: the task model "
            "openai/test-model is called from each rollout"
        ) in init.output
        result = runner.invoke(app, ["run", str(tmp_path / "run"), "--json"])
        assert result.exit_code == 0, result.output
        assert "/v1/chat/completions" in server.requests and "/v1/responses" not in server.requests
    summary = json.loads(result.stdout)
    assert summary["baseline_test"] == [pytest.approx(1 / 3), 0.0]  # the model adds; the harness knows nothing yet
    assert summary["best_test"] == [1.0, 0.0]
    db = sqlite3.connect(tmp_path / "run" / "evodag.sqlite")
    assert {d for (d,) in db.execute("SELECT disposition FROM rollouts")} <= {"success", "task_failure"}


def test_the_doctor_flags_what_a_model_calling_rollout_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = tmp_path / "run"
    run.mkdir()
    (run / "saddler.toml").write_text(
        f'[run]\nbenchmark = "inspect"\n[run.benchmark_options]\ntask = {json.dumps(TASK)}\nmodel = "openai/gpt-4o"\n'
    )
    result = CliRunner().invoke(app, ["doctor", str(run), "--json"])
    needs = [c["detail"] for c in json.loads(result.stdout)["checks"] if c["name"] == "rollout needs"]
    why = "(the task model openai/gpt-4o is called from each rollout)"
    assert needs == [
        f"executor.network: the benchmark's rollouts call the network {why}; with executor.network = false they hang "
        "until executor.timeout_s: set executor.network = true",
        f"executor.env_allow: the benchmark's rollouts read OPENAI_API_KEY {why} but executor.env_allow does not pass "
        "it: add 'OPENAI_API_KEY' to executor.env_allow",
        f"executor.env: OPENAI_API_KEY is not set {why}: export it before saddler run",
    ]
    assert result.exit_code == 1

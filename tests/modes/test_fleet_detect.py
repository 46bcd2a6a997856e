"""Eval-command detection and bench.py (the 002 seed's "no benchmark given" rules), metric extraction, the
`command` benchmark, and fleet.json validation."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from gitrepo import git

from benchmarks.command import CommandBenchmark, extract_metric, run_eval
from saddler.errors import ConfigError
from saddler.modes.fleet.config import parse_fleet
from saddler.modes.fleet.detect import Detection, detect_eval_command, write_bench_script
from saddler.modes.fleet.loop import init_fleet
from saddler.modes.fleet.results import ResultRow, read_results, trailing_discards


def test_detection_order(tmp_path: Path) -> None:
    assert detect_eval_command(tmp_path) is None
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "speed.py").write_text("print(1)\n")
    assert detect_eval_command(tmp_path) == Detection("python3 bench/speed.py", "bench/ folder")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_perf.py").write_text("import pytest\n\n@pytest.mark.benchmark\ndef test_x(): pass\n")
    assert detect_eval_command(tmp_path) == Detection(
        "python3 -m pytest -m benchmark -q", "pytest benchmark marker in test_perf.py"
    )
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "jest", "bench:api": "node b.js"}}))
    assert detect_eval_command(tmp_path) == Detection("npm run bench:api", "package.json script bench:api")
    (tmp_path / "Makefile").write_text("CC := gcc\nbuild:\n\tcc x.c\nperf: build\n\t./perf\n")
    assert detect_eval_command(tmp_path) == Detection("make perf", "Makefile target perf")


def test_written_bench_script_prints_one_number_and_fails_on_crash(tmp_path: Path) -> None:
    found = write_bench_script(tmp_path, f"{sys.executable} -c 'import os; assert os.environ[\"SADDLER_BENCH_SEED\"]'")
    assert found.command == "python3 bench.py"
    ok = run_eval(found.command.replace("python3", sys.executable), tmp_path, seed=5)
    assert ok.returncode == 0 and ok.metric is not None and ok.metric > 0
    assert ok.stdout.strip() == f"{ok.metric:.3f}"
    assert write_bench_script(tmp_path, "exit 3").command == "python3 saddler_bench.py"  # bench.py is kept
    bad = run_eval(f"{sys.executable} saddler_bench.py", tmp_path, seed=5)
    assert bad.metric is None and bad.returncode == 3


def test_metric_extraction_and_direction() -> None:
    out = "requests: 100\np99_latency_ms: 42.5\n"
    assert extract_metric(out, r"^p99_latency_ms:\s*([0-9.]+)") == 42.5
    assert extract_metric("0.9979\n") == 0.9979
    assert extract_metric("loss\n1e-3\n") == 0.001
    assert extract_metric(out) is None  # no regex and no line that is a bare number
    assert extract_metric("no metric", r"acc=([0-9.]+)") is None


def test_run_eval_passes_a_fresh_seed_and_honours_timeouts(tmp_path: Path) -> None:
    cmd = f"{sys.executable} -c 'import os; print(os.environ[\"SADDLER_BENCH_SEED\"])'"
    assert run_eval(cmd, tmp_path, seed=17).metric == 17
    slow = run_eval(f"{sys.executable} -c 'import time; time.sleep(5)'", tmp_path, seed=1, timeout_s=0.3)
    assert slow.metric is None and slow.returncode is None and slow.error == "timeout after 0.3s"


def test_command_benchmark(tmp_path: Path) -> None:
    (tmp_path / "eval.py").write_text("import os\nprint('acc=' + str(int(os.environ['SADDLER_BENCH_SEED']) / 100))\n")
    bench = CommandBenchmark(f"{sys.executable} eval.py", r"acc=([0-9.]+)", "maximize", score_min=0, score_max=1)
    assert [t.id for t in bench.tasks("dev")] == ["metric-dev"]
    result = bench.run(tmp_path, bench.tasks("train")[0], 25, tmp_path / "trace")
    assert result.score == 0.25 and result.passed and result.disposition == "success"
    assert json.loads(Path(result.trace_path or "").read_text())["metric"] == 0.25
    crash = CommandBenchmark(f"{sys.executable} -c 'raise SystemExit(2)'", metric_direction="maximize").run(
        tmp_path, bench.tasks("train")[0], 1, tmp_path / "t2"
    )
    assert not crash.passed and crash.disposition == "task_failure" and crash.error_tail.startswith("exit 2")
    assert CommandBenchmark("x", metric_direction="minimize").score(0.0) == 0.5  # unbounded: 0.5 at metric 0
    with pytest.raises(ConfigError, match="eval_command"):
        CommandBenchmark("")


def test_fleet_json_validation() -> None:
    spec = parse_fleet({"problem": {"eval_command": "make benchmark"}}, "fleet.json")
    assert (spec.config.model, spec.config.fallback_model, spec.config.provider) == ("sonnet", "haiku", "claude")
    assert (spec.config.budget_per_iter, spec.config.max_turns) == (1.0, 0)
    assert (spec.problem.metric_direction, spec.problem.results_file, spec.problem.program_md) == (
        "minimize",
        "results.tsv",
        "program.md",
    )
    assert (spec.stop_when.max_iterations, spec.stop_when.cost_cap_usd) == (50, 0.0)
    assert (spec.search.enabled, spec.search.plateau_threshold) == (True, 3)
    with pytest.raises(ConfigError) as err:
        parse_fleet(
            {"config": {"model": "x", "fallback_model": "x", "provider": "gpt"}, "problem": {"metric_direction": "up"}},
            "fleet.json",
        )
    assert "config.provider" in str(err.value) and "problem.metric_direction" in str(err.value)
    with pytest.raises(ConfigError, match="fallback_model must differ from model"):
        parse_fleet({"config": {"model": "haiku"}}, "fleet.json")


def test_results_tsv_plateau_count(tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(
        "commit\tmetric\tstatus\tdescription\na\t1.0\tkeep\tbaseline\nb\t2.0\tdiscard\tx\n"
        "garbage line\nc\t0.000000\tcrash\ty\n"
    )
    rows = read_results(path)
    assert rows == [
        ResultRow("a", 1.0, "keep", "baseline"),
        ResultRow("b", 2.0, "discard", "x"),
        ResultRow("c", 0.0, "crash", "y"),
    ]
    assert trailing_discards(rows) == 2 and trailing_discards(rows[:1]) == 0


def test_init_detects_the_eval_command_or_writes_bench_py(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet_setup: Callable[..., Path]
) -> None:
    fleet_json = fleet_setup(**{"problem.eval_command": None, "problem.metric_regex": None})
    paths = init_fleet(tmp_path / "root", fleet_json)
    assert paths.spec.problem.eval_command == "make benchmark"
    assert json.loads((tmp_path / "root" / "fleet.json").read_text()) == json.loads(fleet_json.read_text())
    found = json.loads((tmp_path / "root" / ".fleet-init.json").read_text())
    assert found["eval_command_source"] == "Makefile target benchmark"
    (tmp_path / "my-project" / "Makefile").unlink()
    git(tmp_path / "my-project", "commit", "-qam", "no make")
    with pytest.raises(ConfigError, match="--bench-target"):
        init_fleet(tmp_path / "root2", fleet_json)
    paths = init_fleet(tmp_path / "root3", fleet_json, bench_target="python3 bench.py")
    # bench.py exists (the project's own harness): never overwritten, the written script gets another name
    assert paths.spec.problem.eval_command == "python3 saddler_bench.py"
    assert "TARGET = 'python3 bench.py'" in (tmp_path / "my-project" / "saddler_bench.py").read_text()
    assert "Immutable eval harness" in (tmp_path / "my-project" / "bench.py").read_text()  # untouched
    log = subprocess.run(
        ["git", "log", "-1", "--name-only", "--format=%s"],
        cwd=tmp_path / "my-project",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert log[-1] == "saddler_bench.py" and "written" in log


def test_agent_commands_and_descriptions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from saddler.modes.fleet.agent import agent_argv, description
    from saddler.modes.fleet.config import FleetPaths

    spec = parse_fleet({"config": {"max_turns": 7, "budget_per_iter": 0.5}}, "fleet.json")
    claude, stdin = agent_argv(FleetPaths(tmp_path, spec), "PROMPT", tmp_path / "p.md")
    assert claude[claude.index("--max-turns") + 1] == "7" and "0.5" in claude and "PROMPT" not in claude
    assert stdin == str(tmp_path / "p.md")  # the prompt goes by file: program.md alone may pass 128 KiB
    codex = agent_argv(FleetPaths(tmp_path, parse_fleet({"config": {"provider": "codex"}}, "f")), "P", tmp_path / "p")
    assert codex == (
        ["codex", "exec", "--json", "--sandbox", "workspace-write", "--skip-git-repo-check", "--model", "sonnet", "-"],
        str(tmp_path / "p"),
    )
    pi, stdin = agent_argv(FleetPaths(tmp_path, parse_fleet({"config": {"provider": "pi"}}, "f")), "P", tmp_path / "p")
    assert pi[-2:] == [f"@{tmp_path / 'p'}", "Follow the instructions in the attached file."] and stdin is None
    custom = parse_fleet({"config": {"command": "my-agent --file {prompt_file} --m {model}"}}, "f")
    assert agent_argv(FleetPaths(tmp_path, custom), "P", tmp_path / "p.md") == (
        ["my-agent", "--file", str(tmp_path / "p.md"), "--m", "sonnet"],
        None,
    )
    inline = parse_fleet({"config": {"command": "my-agent {prompt}"}}, "f")
    assert agent_argv(FleetPaths(tmp_path, inline), "P", tmp_path / "p.md") == (["my-agent", "P"], None)
    huge, _ = agent_argv(FleetPaths(tmp_path, inline), "x" * 200_000, tmp_path / "p.md")
    assert str(tmp_path / "p.md") in huge[1] and len(huge[1]) < 1000  # a pointer to the file, not 200 KB
    stream = "\n".join(
        [
            json.dumps(
                {"type": "assistant", "message": {"content": [{"type": "text", "text": "DESCRIPTION: first idea"}]}}
            ),
            json.dumps({"type": "result", "result": 'All done.\nDESCRIPTION: cache the "parsed" config'}),
        ]
    )
    assert description(stream) == 'cache the "parsed" config'
    assert description("plain output\nDESCRIPTION:  inline   the loop \n") == "inline the loop"
    assert description("no description") == ""

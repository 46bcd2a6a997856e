"""The `command` benchmark picks the metric's best: rank and accept on the metric, in either direction."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from gitrepo import init_commit
from hypothesis import given
from hypothesis import strategies as st
from repo_paths import METRIC_AGENT
from typer.testing import CliRunner

from benchmarks.command import CommandBenchmark, metric_name_of
from evodag.cli import app as evodag_app
from saddler.benchmark import MetricScale
from saddler.cli.app import app
from saddler.errors import ConfigError

AGENT = METRIC_AGENT
EVAL = "import sys\nvalue = float(open('knob.txt').read())\nprint('accuracy: %r' % value)\n"


def test_metric_direction_is_required_and_named_in_the_error() -> None:
    with pytest.raises(ConfigError, match='metric_direction = "maximize" or "minimize"'):
        CommandBenchmark("python3 eval.py")
    with pytest.raises(ConfigError, match="score_min and score_max go together"):
        CommandBenchmark("x", metric_direction="maximize", score_min=1.0)


def test_metric_name_comes_from_the_regex_or_the_option() -> None:
    assert metric_name_of(r"^p99_latency_ms:\s*([0-9.]+)") == "p99_latency_ms"
    assert metric_name_of(r"([0-9.]+)") == "metric" and metric_name_of("") == "metric"
    bench = CommandBenchmark("x", r"acc=([0-9.]+)", "maximize", metric_name="accuracy")
    assert (bench.metric.name, bench.metric.direction, bench.score_kind) == ("accuracy", "maximize", "mean_score")


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(finite, finite, st.sampled_from(["maximize", "minimize"]))
def test_unbounded_scale_is_strictly_monotonic_and_invertible(a: float, b: float, direction: str) -> None:
    scale = MetricScale("m", direction, None, None)
    sa, sb = scale.score(a), scale.score(b)
    assert 0.0 <= sa <= 1.0
    if abs(a - b) > 1e-6 * max(1.0, abs(a), abs(b)):
        better = a > b if direction == "maximize" else a < b
        assert (sa > sb) == better
    assert scale.metric(sa) == pytest.approx(a, rel=1e-6, abs=1e-6)


def test_bounded_scale_is_linear_and_clamps() -> None:
    up, down = MetricScale("acc", "maximize", 0.0, 1.0), MetricScale("ms", "minimize", 100.0, 300.0)
    assert (up.score(0.755), up.metric(0.755)) == (0.755, 0.755)
    assert (down.score(100.0), down.score(300.0), down.score(200.0), down.score(50.0)) == (1.0, 0.0, 0.5, 1.0)
    assert down.metric(0.5) == 200.0
    assert MetricScale("m", "maximize").metric(0.0) == -math.inf


def test_pass_threshold_is_in_the_metric_unit_and_direction_aware(tmp_path: Path) -> None:
    (tmp_path / "knob.txt").write_text("0.6")
    (tmp_path / "eval.py").write_text(EVAL)
    cmd = f"{sys.executable} eval.py"
    task = CommandBenchmark(cmd, metric_direction="maximize").tasks("train")[0]
    for direction, threshold, passed in (("maximize", 0.7, False), ("maximize", 0.5, True), ("minimize", 0.7, True)):
        bench = CommandBenchmark(cmd, r"accuracy: ([0-9.]+)", direction, pass_threshold=threshold)
        out = bench.run(tmp_path, task, 1, tmp_path / f"t-{direction}-{threshold}")
        assert (out.passed, out.disposition) == (passed, "success" if passed else "task_failure"), out.rationale
        assert out.score == bench.score(0.6)
    assert CommandBenchmark(cmd, r"accuracy: ([0-9.]+)", "maximize").run(tmp_path, task, 1, tmp_path / "x").passed


def _harness(root: Path, baseline: str) -> Path:
    root.mkdir(parents=True)
    (root / "knob.txt").write_text(baseline + "\n")
    (root / "eval.py").write_text(EVAL)
    (root / "saddler.toml").write_text(
        '[harness]\nname = "knob"\n\n[harness.components]\ncapability = ["knob.txt"]\n'
        'protected = ["saddler.toml", "eval.py"]\n'
    )
    init_commit(root, branch="main")
    return root


def _run(tmp_path: Path, direction: str, baseline: str, values: str, **extra: str) -> tuple[dict, str]:
    harness = _harness(tmp_path / "knob-harness", baseline)
    command = f"{sys.executable} {AGENT} {tmp_path / 'agent-state'} {values} knob.txt {{prompt_file}}"
    sets = {
        "benchmark_options.eval_command": json.dumps(f"{sys.executable} eval.py"),
        "benchmark_options.metric_regex": json.dumps(r"^accuracy: ([-0-9.e]+)"),
        "benchmark_options.metric_direction": json.dumps(direction),
        "sessions.command": json.dumps(command),
        "loop.max_iterations": "3", "loop.batch_size": "1", "loop.test_runs": "2",
        "loop.parallel_iterations": "1",  # the scripted agent's answers come in iteration order
        "policies.evolution": '"continue"', "policies.phases": '"none"', "executor.workers": "1",
        **{f"benchmark_options.{k}": json.dumps(v) for k, v in extra.items()},
    }  # fmt: skip
    args = ["init", str(tmp_path / "run"), "--harness", str(harness), "--benchmark", "command", "--backend", "command"]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    runner = CliRunner()
    init = runner.invoke(app, args)
    assert init.exit_code == 0, init.output
    result = runner.invoke(app, ["run", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), (tmp_path / "run" / "report.md").read_text()


@pytest.mark.slow
def test_a_maximize_target_returns_the_highest_metric(tmp_path: Path) -> None:
    summary, report = _run(tmp_path, "maximize", "0.51", "0.755,0.6,1.0")
    assert (summary["baseline_test_metric"], summary["best_test_metric"]) == (0.51, 1.0)
    assert (summary["score"], summary["metric"]) == ("mean_score", "accuracy (maximize)")
    assert summary["best_node"] == 4  # n2 0.755 accepted, n3 0.6 rejected, n4 1.0 accepted
    assert "| Test accuracy (maximize) | 0.51 | 1 | +0.49 |" in report
    assert "**Score:** `mean_score`" in report


@pytest.mark.slow
def test_a_minimize_target_returns_the_lowest_metric(tmp_path: Path) -> None:
    summary, report = _run(tmp_path, "minimize", "250", "200,300,120")
    assert (summary["baseline_test_metric"], summary["best_test_metric"]) == (250.0, 120.0)
    assert summary["metric"] == "accuracy (minimize)"
    assert summary["best_node"] == 4
    assert "| Test accuracy (minimize) | 250 | 120 | -130 |" in report


@pytest.mark.slow
def test_a_metric_is_shown_in_its_unit_and_direction_wherever_a_person_reads_it(tmp_path: Path) -> None:
    """A minimized p50_ms in the thousands: every number a person reads is the metric, not the 0..1 score."""
    summary, report = _run(tmp_path, "minimize", "5200", "4800,6100,3900", metric_name="p50_ms", metric_unit="ms")
    assert (summary["baseline_test_metric"], summary["best_test_metric"], summary["best_node"]) == (5200.0, 3900.0, 4)
    run_dir = tmp_path / "run"
    rows = [line.split("\t")[:3] for line in (run_dir / "results.tsv").read_text().splitlines()[1:]]
    assert [r[1:] for r in rows] == [["5200", "keep"], ["4800", "keep"], ["6100", "discard"], ["3900", "keep"]]
    history = CliRunner().invoke(evodag_app, ["history", "--run", str(run_dir)]).stdout
    assert "scores shown as p50_ms (ms, minimize)" in history.splitlines()[0]
    assert "batch 5200 ms -> 4800 ms  dev 4800 ms" in history and "batch 4800 ms -> 6100 ms" in history
    assert "reason: batch p50_ms (ms, minimize) 4800 ms -> 6100 ms on 1 task(s)" in history  # the decision's reason
    assert "| -400 ms (better) | -400 ms (better) |" in report  # the accepted mutation's batch Δ and dev Δ
    assert "| Test p50_ms (ms, minimize) | 5200 | 3900 | -1300 |" in report
    assert summary["metric"] == "p50_ms (ms, minimize)"
    assert "| batch p50_ms (ms, minimize) 4800 ms -> 6100 ms on 1 task(s)" in report  # failed mutations
    test_row = next(line for line in report.splitlines() if line.startswith("| Test mean score"))
    assert "(5200 ms)" in test_row and "(3900 ms)" in test_row
    assert "0.000 -> 0.000" not in history + report
    status = CliRunner().invoke(app, ["status", str(run_dir)]).stdout
    assert "dev 3900 ms (baseline 5200 ms)" in status

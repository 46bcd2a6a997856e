"""A plugin that breaks the contract is never silent: rollouts that could not run count nowhere, a baseline whose
rollouts all failed to run stops `saddler run` with exit 1 and the first error, the infra-error share shows in
status, report and summary, and `validate` calls `tasks()` and checks what it returns."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evodag.cli import app as evodag_app
from saddler.cli.app import app

runner = CliRunner()

PLUGIN = '''
"""Module docstring: a family of broken benchmarks."""
from pathlib import Path

from saddler.benchmark import RolloutResult, Task


class BrokenBench:
    """A benchmark whose rollouts break in the way `mode` says."""

    def __init__(self, mode="raise"):
        self.mode = mode

    def tasks(self, split):
        if self.mode == "strings":
            return [f"{split}-1", f"{split}-2"]
        return [Task(id=f"{split}-{i}", group=f"{split}-{i}", split=split) for i in range(4)]

    def run(self, harness_dir, task, seed, trace_dir):
        answer = (Path(harness_dir) / "answer.txt").read_text().strip()
        if self.mode == "raise":
            raise RuntimeError("the plugin's grader is broken: no such table 'answers'")
        if self.mode == "dict":
            return {"task_id": task.id, "score": 1.0}
        if self.mode == "liar":
            return RolloutResult(task.id, "0.9", "yes", "great")
        if self.mode == "some_infra" and task.id.endswith(("-0", "-1")):
            return RolloutResult(task.id, 0.9, False, "infra_error", error_tail="sandbox did not start")
        ok = answer == "42"
        return RolloutResult(task.id, float(ok), ok, "success" if ok else "task_failure")


class OtherBench(BrokenBench):
    """Another class of the same module, with a docstring of its own."""
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source_repo: Callable[..., Path]) -> Path:
    (tmp_path / "broken_bench.py").write_text(PLUGIN, encoding="utf-8")
    toml = '[harness]\nname = "h"\n[harness.components]\ncapability = ["answer.txt"]\n'
    source_repo(tmp_path / "harness", {"answer.txt": "41\n", "saddler.toml": toml})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return tmp_path


def _init(root: Path, mode: str) -> Path:
    run_dir = root / f"run-{mode}"
    sets = ["loop.max_iterations=1", "loop.batch_size=2", "loop.test_runs=1", "executor.workers=2",
            "policies.phases=none", f'benchmark_options.mode="{mode}"']  # fmt: skip
    args = ["init", str(run_dir), "--harness", str(root / "harness"), "--benchmark", "broken_bench:BrokenBench"]
    init = runner.invoke(app, [*args, *(x for s in sets for x in ("--set", s))])
    assert init.exit_code == 0, init.output
    return run_dir


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("raise", "RuntimeError: the plugin's grader is broken: no such table 'answers'"),
        ("dict", "BrokenBench.run() returned dict {'task_id': 'dev-0', 'score': 1.0}: it must return a "
                 "saddler.benchmark.RolloutResult"),
        ("liar", "[saddler] the benchmark's RolloutResult breaks the contract: unknown disposition 'great' (one of "
                 "success, task_failure, infra_error, timeout); score '0.9' is not a finite number; passed 'yes' is "
                 "not a bool"),
    ],
)  # fmt: skip
def test_a_baseline_that_cannot_run_stops_the_run_with_the_first_error(plugin: Path, mode: str, says: str) -> None:
    run_dir = _init(plugin, mode)
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 1, result.output
    assert "every one of the baseline's 4 dev rollout(s) is an infra_error" in result.stderr
    assert "The first (dev-0)" in result.stderr and says in result.stderr
    assert "best_test" not in result.stdout  # no summary of a run that never ran: no 0.000 printed


def test_an_infra_errors_score_counts_nowhere_and_its_share_is_shown(plugin: Path) -> None:
    run_dir = _init(plugin, "some_infra")
    result = runner.invoke(app, ["run", str(run_dir)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "best_dev: 0.0000" in lines and "baseline_test: 0.0000" in lines  # not the 0.9 the infra rows claim
    infra = next(line for line in lines if line.startswith("infra_errors: "))
    assert infra.endswith("% of rollouts, counted nowhere)")
    status = runner.invoke(app, ["status", str(run_dir), "--json"])
    assert json.loads(status.stdout)["infra_errors"] == int(infra.split()[1])
    assert "infra errors" in runner.invoke(app, ["status", str(run_dir)]).stdout
    report = (run_dir / "report.md").read_text()
    assert "**Infra errors:**" in report and "their scores count in no figure of this report" in report
    summary = runner.invoke(evodag_app, ["summary", "--run", str(run_dir)])
    assert "infra errors (counted nowhere)" in summary.stdout, summary.output


def test_validate_calls_tasks_and_checks_what_it_returns(plugin: Path) -> None:
    run_dir = plugin / "run-strings"
    args = ["init", str(run_dir), "--harness", str(plugin / "harness"), "--benchmark", "broken_bench:BrokenBench",
            "--set", 'benchmark_options.mode="strings"', "--set", "policies.phases=none"]  # fmt: skip
    init = runner.invoke(app, args)
    assert init.exit_code == 0, init.output
    for command in ("validate", "run"):
        result = runner.invoke(app, [command, str(run_dir)])
        assert result.exit_code == 2, result.output
        assert (
            "run.benchmark: tasks('train') returned str 'train-1', not a saddler.benchmark.Task: return Task(id=..., "
            "group=..., split='train') for each task"
        ) in result.output
        assert "Traceback" not in result.output


def test_saddler_list_shows_each_classs_own_docstring(plugin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "saddler.benchmark.entry_point_benchmarks",
        lambda: {"broken": "broken_bench:BrokenBench", "other": "broken_bench:OtherBench"},
    )
    rows = {
        b["name"]: b["description"] for b in json.loads(runner.invoke(app, ["list", "--json"]).stdout)["benchmarks"]
    }
    assert rows["broken"] == "A benchmark whose rollouts break in the way `mode` says."
    assert rows["other"] == "Another class of the same module, with a docstring of its own."


def test_init_says_the_offline_backend_has_no_patch_bank_to_use(plugin: Path) -> None:
    args = ["init", str(plugin / "run-offline"), "--harness", str(plugin / "harness"), "--benchmark",
            "broken_bench:BrokenBench", "--set", "policies.phases=none"]  # fmt: skip
    init = runner.invoke(app, args)
    assert init.exit_code == 0, init.output
    assert (
        "note: the offline backend patches only benchmarks that ship a patch bank, and BrokenBench has none: every "
        "offline diagnosis will be no_patch."
    ) in init.output

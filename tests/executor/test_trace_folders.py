"""Each rollout gets its own trace folder: parallel rollouts never share (and clobber) a trace file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from trace_plugins import SPEC, ClobberProbe

from evodag.store import EvoDAG
from saddler.config import ExecutorConfig
from saddler.executor.local import LocalExecutor
from saddler.harness.space import HarnessSpace
from saddler.run.evaluate import Evaluator
from saddler.run.rollout_rows import rollout_trace_dir


def _evaluator(tmp_path: Path, bench: object, name: str, options: dict) -> tuple[Evaluator, EvoDAG, object]:
    template = tmp_path / "template"
    template.mkdir()
    (template / "policy.txt").write_text("baseline")
    store = EvoDAG(tmp_path / "run" / "evodag.sqlite")
    space = HarnessSpace.create(template, tmp_path / "run" / "harness", tmp_path / "run" / "worktrees")
    run_id = store.create_run({"benchmark": name}, seed=0).id
    # the probe's barrier folder is shared by parallel rollouts on purpose: no sandbox (see test_executor_hostile)
    executor = LocalExecutor(ExecutorConfig.model_validate({"workers": 2, "timeout_s": 30, "sandbox": "none"}))
    evaluator = Evaluator(store, run_id, space, bench, name, options, executor, tmp_path / "run")  # type: ignore[arg-type]
    node = store.add_node(run_id, space.baseline_commit(), None, 0, "baseline", "baseline", "baseline")
    return evaluator, store, node


def test_parallel_rollouts_of_a_plugin_writing_trace_json_do_not_clobber_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fakes_importable: None
) -> None:
    options = {"barrier_dir": str(tmp_path / "barrier"), "parties": 2, "n_tasks": 4}
    bench = ClobberProbe(**options)
    evaluator, store, node = _evaluator(tmp_path, bench, SPEC, options)
    try:
        rows = evaluator.evaluate(node, bench.tasks("dev"), "dev", [7])
    finally:
        evaluator.executor.close()
    assert [r.passed for r in rows] == [True] * 4, [(r.rationale, r.error_tail, r.disposition) for r in rows]
    paths = [r.trace_path for r in rows]
    assert len(set(paths)) == 4
    for row in rows:
        expected = rollout_trace_dir(tmp_path / "run", node.id, "dev", row.task_id, 0, 7)
        assert row.trace_path == str(expected / "trace.json")
        assert json.loads(Path(row.trace_path).read_text()) == {"task": row.task_id, "seed": 7}
    store.close()


def test_rollout_trace_dir_names_task_repetition_and_seed_safely(tmp_path: Path) -> None:
    split_dir = tmp_path / "traces" / "n3" / "train"
    assert rollout_trace_dir(tmp_path, 3, "train", "fix-git.v2", 1, 42) == split_dir / "fix-git.v2-r1-s42"
    odd = [rollout_trace_dir(tmp_path, 3, "train", t, 0, 1) for t in ("a/b c", "a_b c", "a/b_c", "..", "../x")]
    assert all(p.parent == split_dir for p in odd) and len(set(odd)) == len(odd)
    assert odd[0].name.startswith("a_b_c~")


def test_the_command_benchmark_writes_one_trace_per_rollout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fakes_importable: None
) -> None:
    from benchmarks.command import CommandBenchmark

    command = f"{sys.executable} -c \"import os; print(os.environ['SADDLER_BENCH_SEED'])\""
    options = {"eval_command": command, "metric_direction": "maximize"}
    bench = CommandBenchmark(**options)
    evaluator, store, node = _evaluator(tmp_path, bench, "command", options)
    try:
        rows = evaluator.evaluate(node, bench.tasks("test"), "test", [11, 12, 13])
    finally:
        evaluator.executor.close()
    assert len({r.trace_path for r in rows}) == 3
    for row in rows:
        assert json.loads(Path(row.trace_path).read_text())["seed"] == row.seed
    store.close()

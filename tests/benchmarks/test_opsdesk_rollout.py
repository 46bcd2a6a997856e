"""opsdesk rollouts: determinism, harness faults as data, symptoms, splits, the runner CLI, isolation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import REPO

from benchmarks.opsdesk import TEMPLATE_DIR, OpsdeskBenchmark
from saddler.benchmark import Benchmark, RolloutResult, Task

BENCH = OpsdeskBenchmark()


def _task(task_id: str) -> Task:
    return next(t for split in ("train", "dev", "test") for t in BENCH.tasks(split) if t.id == task_id)


def _copy(tmp_path: Path, name: str = "h") -> Path:
    dest = tmp_path / name
    shutil.copytree(TEMPLATE_DIR, dest)
    return dest


def test_protocol_splits_and_sizes() -> None:
    assert isinstance(BENCH, Benchmark) and BENCH.name == "opsdesk"
    splits = {s: BENCH.tasks(s) for s in ("train", "dev", "test")}
    groups = {s: {t.group for t in tasks} for s, tasks in splits.items()}
    assert sum(len(t) for t in splits.values()) >= 90
    assert sum(len(g) for g in groups.values()) >= 9
    assert not (groups["train"] & groups["dev"] or groups["train"] & groups["test"] or groups["dev"] & groups["test"])
    assert [t.id for t in BENCH.tasks("train")] == [t.id for t in OpsdeskBenchmark().tasks("train")]
    with pytest.raises(ValueError, match="unknown split"):
        BENCH.tasks("validation")


def test_same_seed_same_trace_and_score(tmp_path: Path) -> None:
    harness = _copy(tmp_path)
    outcomes = {}
    for task_id in ("northwind-05", "atlas-01", "sakura-09"):
        a = BENCH.run(harness, _task(task_id), 7, tmp_path / "a")
        b = BENCH.run(harness, _task(task_id), 7, tmp_path / "b")
        assert Path(a.trace_path or "").read_bytes() == Path(b.trace_path or "").read_bytes()
        assert (a.score, a.passed, a.rationale, a.llm_calls, a.cost) == (
            b.score,
            b.passed,
            b.rationale,
            b.llm_calls,
            b.cost,
        )
        outcomes[task_id] = a.passed
    assert len({BENCH.run(harness, _task("atlas-01"), s, tmp_path / "s").trace_path for s in range(2)}) == 2


def test_some_baseline_outcomes_depend_on_the_seed(tmp_path: Path) -> None:
    harness = _copy(tmp_path)
    flips = 0
    for task in BENCH.tasks("test")[:20]:
        results = {BENCH.run(harness, task, seed, tmp_path / "t").passed for seed in range(3)}
        flips += len(results) == 2
    assert flips >= 1


def test_harness_exceptions_become_failed_results(tmp_path: Path) -> None:
    broken_import = _copy(tmp_path, "imp")
    (broken_import / "tools" / "mail.py").write_text("def oops(:\n")
    res = BENCH.run(broken_import, _task("atlas-01"), 0, tmp_path / "t")
    assert (res.passed, res.disposition, res.score, res.failure_file) == (False, "task_failure", 0.0, "tools/mail.py")
    assert "SyntaxError" in res.error_tail and res.rationale.startswith("harness error: SyntaxError")
    broken_loop = _copy(tmp_path, "loop")
    loop = broken_loop / "loop.py"
    loop.write_text(loop.read_text().replace('    session.stop("max_turns")', "    raise RuntimeError('boom')"))
    (broken_loop / "tools" / "files.py").write_text(
        "from benchmarks.opsdesk.sdk import tool\n\n\n@tool('files_read', 'Read a text file by path.')\n"
        "def files_read(env, path):\n    return 1 / 0\n"
    )
    res = BENCH.run(broken_loop, _task("atlas-04"), 0, tmp_path / "t")
    assert (res.passed, res.disposition, res.failure_file) == (False, "task_failure", "tools/files.py")
    exiting = _copy(tmp_path, "exit")
    (exiting / "loop.py").write_text("import sys\n\n\ndef run(session):\n    print('noise')\n    sys.exit(3)\n")
    quit_res = BENCH.run(exiting, _task("atlas-04"), 0, tmp_path / "t3")
    assert (quit_res.passed, quit_res.disposition, quit_res.failure_file) == (False, "task_failure", "loop.py")
    assert "SystemExit: 3" in quit_res.error_tail
    assert "ZeroDivisionError" in res.error_tail
    events = [json.loads(line) for line in Path(res.trace_path or "").read_text().splitlines()]
    assert any(e["type"] == "harness_error" and e["file"] == "tools/files.py" for e in events)


def test_symptoms_from_known_failing_traces(tmp_path: Path) -> None:
    harness = _copy(tmp_path)
    count = BENCH.run(harness, _task("northwind-01"), 0, tmp_path / "t")  # dense calendar, 12 events
    assert not count.passed and count.rationale == "answer: answered '5', expected 12"
    assert count.failure_file == "tools/calendar.py"
    assert [(s.code, s.file) for s in BENCH.symptoms(count)] == [("pagination_truncated", "tools/calendar.py")]
    expense = BENCH.run(harness, _task("harborline-01"), 0, tmp_path / "t")
    codes = [(s.code, s.file) for s in BENCH.symptoms(expense)]
    assert codes[0] == ("missing_tool:expenses", "tools/expenses.py")
    assert BENCH.symptoms(BENCH.run(harness, _task("greyfield-09"), 0, tmp_path / "t")) == []  # passes


def test_environment_and_grader_live_outside_the_harness() -> None:
    harness_files = {p.name for p in TEMPLATE_DIR.rglob("*") if p.is_file()}
    for name in ("env.py", "tasks.py", "grader.py", "world.py", "world_data.py", "agent.py", "runner.py"):
        assert (REPO / "benchmarks" / "opsdesk" / name).is_file()
        assert name not in harness_files
    assert not (REPO / "benchmarks" / "opsdesk").resolve().is_relative_to(TEMPLATE_DIR.resolve())
    for patch in BENCH.patch_bank():
        assert all(not f.startswith(("..", "/")) and "benchmarks" not in f for f in patch.files)
    fp = BENCH.fingerprint()
    assert fp == OpsdeskBenchmark().fingerprint() != OpsdeskBenchmark(noise=0.5).fingerprint()
    assert len(BENCH.model_fingerprint()) == 16


def test_two_harnesses_in_one_process_do_not_share_modules(tmp_path: Path) -> None:
    plain, patched = _copy(tmp_path, "plain"), _copy(tmp_path, "patched")
    loop = patched / "loop.py"
    loop.write_text(loop.read_text().replace("MAX_TURNS = 12", "MAX_TURNS = 1"))
    a = BENCH.run(plain, _task("atlas-04"), 3, tmp_path / "a")
    b = BENCH.run(patched, _task("atlas-04"), 3, tmp_path / "b")
    assert [s.code for s in BENCH.symptoms(b)][:1] == ["max_turns"]
    assert a.llm_calls > b.llm_calls == 1


def test_runner_cli_prints_the_result_json(tmp_path: Path) -> None:
    harness = _copy(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.opsdesk.runner",
            str(harness),
            "northwind-01",
            "0",
            "--trace-dir",
            str(tmp_path / "cli"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    in_proc = BENCH.run(harness, _task("northwind-01"), 0, tmp_path / "in").to_dict()
    for key in ("task_id", "score", "passed", "disposition", "rationale", "failure_file", "llm_calls", "cost"):
        assert data[key] == in_proc[key]
    assert Path(data["trace_path"]).is_file() and not list(harness.rglob("__pycache__"))
    bad = subprocess.run(
        [sys.executable, "-m", "benchmarks.opsdesk.runner", str(harness), "nope-01", "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert bad.returncode == 2 and "unknown task id 'nope-01'" in bad.stderr


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(index=st.integers(min_value=0, max_value=119), seed=st.integers(min_value=0, max_value=10_000))
def test_result_and_trace_round_trip(tmp_path: Path, index: int, seed: int) -> None:
    from benchmarks.opsdesk.runner import rollout_dict
    from benchmarks.opsdesk.symptoms import extract, read_trace
    from benchmarks.opsdesk.tasks import all_specs

    spec = all_specs()[index]
    raw = rollout_dict(TEMPLATE_DIR, spec, seed, tmp_path / "rt")
    result = RolloutResult.from_dict(json.loads(json.dumps(raw)))
    assert result.to_dict() == raw
    events = read_trace(result.trace_path or "")
    assert events[0]["task_id"] == spec.id and events[-1]["type"] == "grade"
    assert events[-1]["passed"] == result.passed
    symptoms = extract(events)
    assert BENCH.symptoms(result) == symptoms
    assert (result.failure_file == symptoms[0].file) if symptoms else (result.passed or result.failure_file is None)

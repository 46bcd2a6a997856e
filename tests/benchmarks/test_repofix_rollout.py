"""repofix rollouts: determinism, harness faults as data, symptoms, splits, the runner CLI, isolation."""

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

from benchmarks.repofix import TEMPLATE_DIR, RepofixBenchmark
from benchmarks.repofix.repos import REPOS
from saddler.benchmark import Benchmark, RolloutResult, Task, load_benchmark

BENCH = RepofixBenchmark()


def _task(task_id: str) -> Task:
    return next(t for split in ("train", "dev", "test") for t in BENCH.tasks(split) if t.id == task_id)


def _copy(tmp_path: Path, name: str = "h") -> Path:
    dest = tmp_path / name
    shutil.copytree(TEMPLATE_DIR, dest)
    return dest


def _events(result: RolloutResult) -> list[dict[str, object]]:
    return [json.loads(line) for line in Path(result.trace_path or "").read_text().splitlines()]


def test_protocol_splits_and_sizes() -> None:
    assert isinstance(BENCH, Benchmark) and BENCH.name == "repofix" and BENCH.score_kind == "pass_rate"
    assert type(load_benchmark("repofix")) is RepofixBenchmark
    splits = {s: BENCH.tasks(s) for s in ("train", "dev", "test")}
    groups = {s: {t.group for t in tasks} for s, tasks in splits.items()}
    assert 100 <= sum(len(t) for t in splits.values()) <= 150
    assert [len(g) for g in groups.values()] == [4, 4, 4]
    assert not (groups["train"] & groups["dev"] or groups["train"] & groups["test"] or groups["dev"] & groups["test"])
    assert {t.family for t in splits["train"]} == {t.family for tasks in splits.values() for t in tasks}
    assert [t.id for t in BENCH.tasks("dev")] == [t.id for t in RepofixBenchmark().tasks("dev")]
    assert {r.layout for r in REPOS} == {"flat", "monorepo"} and {r.size for r in REPOS} == {"small", "medium", "large"}
    with pytest.raises(ValueError, match="unknown split"):
        BENCH.tasks("validation")


def test_same_seed_same_trace_and_score(tmp_path: Path) -> None:
    harness = _copy(tmp_path)
    for task_id in ("tinyjson-01", "geodesy-04", "shopcart-07"):
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


def test_some_baseline_outcomes_depend_on_the_seed(tmp_path: Path) -> None:
    harness = _copy(tmp_path)
    flips = 0
    for task in BENCH.tasks("train")[:20]:
        flips += len({BENCH.run(harness, task, seed, tmp_path / "t").passed for seed in range(3)}) == 2
    assert flips >= 2


def test_harness_exceptions_become_failed_results(tmp_path: Path) -> None:
    broken_import = _copy(tmp_path, "imp")
    (broken_import / "tools" / "edit.py").write_text("def oops(:\n")
    res = BENCH.run(broken_import, _task("tinyjson-01"), 0, tmp_path / "t")
    assert (res.passed, res.disposition, res.score, res.failure_file) == (False, "task_failure", 0.0, "tools/edit.py")
    assert "SyntaxError" in res.error_tail and res.rationale.startswith("harness error: SyntaxError")
    broken_tool = _copy(tmp_path, "tool")
    (broken_tool / "tools" / "files.py").write_text(
        "from benchmarks.repofix.sdk import tool\n\n\n@tool('open_file', 'Open a file and show its whole content.')\n"
        "def open_file(ws, path):\n    return 1 / 0\n"
    )
    res = BENCH.run(broken_tool, _task("tinyjson-01"), 0, tmp_path / "t")
    assert (res.passed, res.disposition, res.failure_file) == (False, "task_failure", "tools/files.py")
    assert "ZeroDivisionError" in res.error_tail
    assert any(e["type"] == "harness_error" and e["file"] == "tools/files.py" for e in _events(res))
    exiting = _copy(tmp_path, "exit")
    (exiting / "loop.py").write_text("import sys\n\n\ndef run(session):\n    print('noise')\n    sys.exit(3)\n")
    quit_res = BENCH.run(exiting, _task("tinyjson-01"), 0, tmp_path / "t3")
    assert (quit_res.passed, quit_res.disposition, quit_res.failure_file) == (False, "task_failure", "loop.py")
    assert "SystemExit: 3" in quit_res.error_tail


@pytest.mark.parametrize(
    ("task_id", "first", "file"),
    [
        ("tinyjson-01", "style_violation", "prompts/system.md"),  # a fix with a comment too long for black's 88
        ("tinyjson-03", "missing_tool:scripts", "tools/scripts.py"),  # it wanted to reproduce: no tool for it
        ("logpipe-01", "edit_wrong_occurrence", "tools/edit.py"),  # copy-pasted code: the first match was a sibling
        ("geodesy-02", "edited_wrong_copy", "tools/search.py"),  # the rename went to build/lib copies
        ("geodesy-04", "edited_wrong_copy", "tools/search.py"),  # imported from a module only build/ still has
        ("shopcart-04", "site_not_found", "tools/search.py"),  # the definition was not among the 10 matches shown
        ("shopcart-09", "collection_errors", "tools/tests.py"),  # monorepo: pytest at the root
    ],
)
def test_symptoms_of_known_baseline_failures(tmp_path: Path, task_id: str, first: str, file: str) -> None:
    res = BENCH.run(TEMPLATE_DIR, _task(task_id), 0, tmp_path / "t")
    symptoms = BENCH.symptoms(res)
    assert not res.passed and (symptoms[0].code, symptoms[0].file) == (first, file) and res.failure_file == file
    assert all(s.task_id == task_id for s in symptoms)


def test_a_passing_rollout_has_no_symptoms(tmp_path: Path) -> None:
    res = BENCH.run(TEMPLATE_DIR, _task("tinyjson-02"), 0, tmp_path / "t")
    assert (res.passed, res.score, res.failure_file, BENCH.symptoms(res)) == (True, 1.0, None, [])


def test_a_full_context_and_the_time_limit_end_the_episode_and_the_checkout_is_graded(tmp_path: Path) -> None:
    tiny_window = _copy(tmp_path, "ctx")
    loop = tiny_window / "loop.py"
    loop.write_text(loop.read_text().replace("    prepare_turn(session)\n", "    session.context_limit = 300\n", 1))
    res = BENCH.run(tiny_window, _task("tinyjson-01"), 0, tmp_path / "t")
    assert res.disposition == "task_failure" and not res.error_tail
    assert [s.code for s in BENCH.symptoms(res)][:1] == ["context_overflow"]
    slow = _copy(tmp_path, "slow")
    hook = slow / "hooks" / "slow.py"
    hook.write_text("def after_tool(state, name, args, result):\n    return [('run_tests', {})] * 5\n")
    res = BENCH.run(slow, _task("tilestore-01"), 0, tmp_path / "t")
    events = _events(res)
    assert {"type": "stop", "reason": "time_limit"}.items() <= next(e for e in events if e["type"] == "stop").items()
    assert [s.code for s in BENCH.symptoms(res)][:1] == ["time_limit"] and res.failure_file == "tools/tests.py"


def test_environment_and_grader_live_outside_the_harness() -> None:
    harness_files = {p.name for p in TEMPLATE_DIR.rglob("*") if p.is_file()}
    for name in ("env.py", "tasks.py", "grader.py", "repos.py", "agent.py", "runner.py", "behaviour.py"):
        assert (REPO / "benchmarks" / "repofix" / name).is_file() and name not in harness_files
    for patch in BENCH.patch_bank():
        assert all(not f.startswith(("..", "/")) and "benchmarks" not in f for f in patch.files)
    assert BENCH.fingerprint() == RepofixBenchmark().fingerprint() != RepofixBenchmark(noise=0.5).fingerprint()
    assert BENCH.fingerprint() != load_benchmark("opsdesk").fingerprint()
    assert len(BENCH.model_fingerprint()) == 16


def test_two_harnesses_in_one_process_do_not_share_modules(tmp_path: Path) -> None:
    plain, patched = _copy(tmp_path, "plain"), _copy(tmp_path, "patched")
    loop = patched / "loop.py"
    loop.write_text(loop.read_text().replace("MAX_TURNS = 20", "MAX_TURNS = 1"))
    a = BENCH.run(plain, _task("shopcart-03"), 3, tmp_path / "a")
    b = BENCH.run(patched, _task("shopcart-03"), 3, tmp_path / "b")
    assert [s.code for s in BENCH.symptoms(b)][:1] == ["max_turns"]
    assert a.llm_calls > b.llm_calls == 1


def test_runner_cli_prints_the_result_json(tmp_path: Path) -> None:
    harness = _copy(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    cmd = [sys.executable, "-m", "benchmarks.repofix.runner", str(harness), "tinyjson-01", "0"]
    proc = subprocess.run(
        [*cmd, "--trace-dir", str(tmp_path / "cli")], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    in_proc = BENCH.run(harness, _task("tinyjson-01"), 0, tmp_path / "in").to_dict()
    for key in ("task_id", "score", "passed", "disposition", "rationale", "failure_file", "llm_calls", "cost"):
        assert data[key] == in_proc[key]
    assert Path(data["trace_path"]).is_file() and not list(harness.rglob("__pycache__"))
    bad = subprocess.run([*cmd[:4], "nope-01", "0"], capture_output=True, text=True, env=env, cwd=REPO)
    assert bad.returncode == 2 and "unknown task id 'nope-01'" in bad.stderr


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(index=st.integers(min_value=0, max_value=119), seed=st.integers(min_value=0, max_value=10_000))
def test_result_and_trace_round_trip(tmp_path: Path, index: int, seed: int) -> None:
    from benchmarks.repofix.runner import rollout_dict
    from benchmarks.repofix.symptoms import extract, read_trace
    from benchmarks.repofix.tasks import all_specs

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
    assert not result.passed or not symptoms

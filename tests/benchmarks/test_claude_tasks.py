"""The claude_agent harness template run by the claude-tasks benchmark through a fake SDK transport."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fake_transport import FakeTransport, McpCall, assistant, result

from benchmarks.claude_tasks import ClaudeTasksBenchmark
from benchmarks.claude_tasks.data import grade, ledger_csv, questions
from saddler.benchmark import load_benchmark
from saddler.config import load_harness_config
from saddler.resources import template_path

TEMPLATE = template_path("claude_agent")


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    dest = tmp_path / "harness"
    shutil.copytree(TEMPLATE, dest)
    return dest


def bench_with(scripts: list[list[object]]) -> tuple[ClaudeTasksBenchmark, list[FakeTransport]]:
    made: list[FakeTransport] = []

    def factory() -> FakeTransport:
        made.append(FakeTransport(scripts.pop(0)))
        return made[-1]

    return ClaudeTasksBenchmark(transport=factory), made


def test_splits_are_held_out_by_group() -> None:
    bench = load_benchmark("claude-tasks")
    groups = {split: {t.group for t in bench.tasks(split)} for split in ("train", "dev", "test")}
    assert groups == {"train": {"acme", "globex"}, "dev": {"initech"}, "test": {"hooli", "umbrella"}}
    assert len(bench.tasks("train")) == 8 and bench.tasks("train") == bench.tasks("train")
    assert bench.fingerprint() == ClaudeTasksBenchmark().fingerprint()


def test_seed_shuffles_rows_but_not_answers() -> None:
    a, b = ledger_csv("acme", 1), ledger_csv("acme", 2)
    assert a != b and sorted(a.splitlines()) == sorted(b.splitlines()) and len(a.splitlines()) == 41
    assert [q.expected for q in questions("acme")] == [q.expected for q in questions("acme")]
    assert grade("12.50", "$12.5") and grade("Contoso", "contoso.") and not grade("3", "4")


def test_agent_submits_through_its_mcp_tool_and_passes(harness: Path, tmp_path: Path) -> None:
    bench, made = bench_with([])
    task = next(t for t in bench.tasks("train") if t.family == "policy_limit")
    expected = next(q.expected for q in questions(task.group) if q.task_id == task.id)
    made_scripts = [
        [
            McpCall("workspace", "read_file", {"name": "policy.md"}),
            McpCall("workspace", "submit_answer", {"answer": expected}),
            assistant("Submitted."),
            result(cost=0.003, turns=3),
        ]
    ]
    bench, made = bench_with(made_scripts)
    out = bench.run(harness, task, seed=5, trace_dir=tmp_path / "traces")
    assert (out.passed, out.score, out.disposition, out.cost, out.llm_calls) == (True, 1.0, "success", 0.003, 3)
    read = made[0].mcp_responses[0]["result"]["content"][0]["text"]
    assert "Daily meal limit" in read
    trace = [json.loads(x) for x in Path(out.trace_path or "").read_text().splitlines()]
    assert trace[0] == {"kind": "task", "prompt": task.prompt}
    assert trace[-1] == {"kind": "outcome", "answer": expected, "expected": expected, "passed": True, "error": ""}
    assert made[0].initialize is not None
    assert set(made[0].initialize["hooks"]) == {"PreToolUse", "PostToolUse"}


def test_truncating_read_tool_makes_totals_fail_with_a_rationale(harness: Path, tmp_path: Path) -> None:
    bench, made = bench_with(
        [
            [
                McpCall("workspace", "read_file", {"name": "ledger.csv"}),
                McpCall("workspace", "submit_answer", {"answer": "1.00"}),
                result(cost=0.01),
            ]
        ]
    )
    task = next(t for t in bench.tasks("train") if t.family == "total_category")
    out = bench.run(harness, task, seed=0, trace_dir=tmp_path / "traces")
    assert len(made[0].mcp_responses[0]["result"]["content"][0]["text"].splitlines()) == 20  # the baseline's gap
    assert (out.passed, out.disposition, out.failure_file) == (False, "task_failure", "tools/workspace.py")
    assert out.rationale.startswith("expected '") and "the agent answered '1.00'" in out.rationale
    assert [s.code for s in bench.symptoms(out)] == ["wrong_answer"]


def test_no_answer_and_broken_harness_are_failed_rollouts(harness: Path, tmp_path: Path) -> None:
    bench, _ = bench_with([[assistant("I am not sure."), result()]])
    task = bench.tasks("dev")[0]
    out = bench.run(harness, task, seed=0, trace_dir=tmp_path / "traces")
    assert out.passed is False and "submitted no answer" in out.rationale
    assert out.failure_file == "prompts/system.md"

    (harness / "agent.py").write_text("def run_task(:\n")
    bench, _ = bench_with([[result()]])
    broken = bench.run(harness, task, seed=0, trace_dir=tmp_path / "traces")
    assert (broken.passed, broken.disposition) == (False, "task_failure") and "SyntaxError" in broken.error_tail


def test_without_a_key_a_rollout_is_an_infra_error(
    harness: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)
    bench = ClaudeTasksBenchmark()
    out = bench.run(harness, bench.tasks("train")[0], seed=0, trace_dir=tmp_path / "traces")
    assert (out.disposition, out.passed) == ("infra_error", False) and "ANTHROPIC_API_KEY" in out.error_tail


def test_template_component_map() -> None:
    config = load_harness_config(TEMPLATE)
    assert config.components.capability == ["tools/**", "agent.py", "settings.py"]
    assert config.components.steering == ["prompts/**", "hooks/**"]
    assert "saddler.toml" in config.components.protected
    assert all((TEMPLATE / f).is_file() for f in config.structure.required_files)

"""The claude_agent template's `agent.py` when the SDK raises after an error result (the CLI exits non-zero
after `error_max_turns` and the SDK turns that into `ResultError`): the conversation, the trace and a submitted
answer survive, and the answer is graded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fake_transport import FakeTransport, McpCall, assistant, result

from benchmarks.claude_tasks import ClaudeTasksBenchmark
from benchmarks.claude_tasks.data import questions
from saddler.resources import template_path


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    dest = tmp_path / "harness"
    shutil.copytree(template_path("claude_agent"), dest)
    return dest


def bench_with(transport: FakeTransport) -> ClaudeTasksBenchmark:
    return ClaudeTasksBenchmark(transport=lambda: transport)


def test_a_submitted_answer_is_graded_after_the_turn_limit(harness: Path, tmp_path: Path) -> None:
    probe = ClaudeTasksBenchmark()
    task = next(t for t in probe.tasks("train") if t.family == "policy_limit")
    expected = next(q.expected for q in questions(task.group) if q.task_id == task.id)
    transport = FakeTransport(
        [
            McpCall("workspace", "read_file", {"name": "policy.md"}),
            McpCall("workspace", "submit_answer", {"answer": expected}),
            assistant("Submitted; checking once more."),
            result("error_max_turns", is_error=True, cost=0.02, turns=12),
        ],
        exit_code=1,
    )
    out = bench_with(transport).run(harness, task, seed=0, trace_dir=tmp_path / "traces")
    assert (out.passed, out.score, out.disposition) == (True, 1.0, "success")
    assert (out.cost, out.llm_calls) == (0.02, 12)
    assert out.rationale != "the agent crashed"
    trace = [json.loads(x) for x in Path(out.trace_path or "").read_text().splitlines()]
    kinds = [t.get("type") for t in trace if t["kind"] == "message"]
    assert kinds[-3:] == ["AssistantMessage", "ResultMessage", "error"]
    assert "ResultError" in trace[-2]["error"] or "ProcessError" in trace[-2]["error"]
    assert trace[-1]["answer"] == expected and trace[-1]["passed"] is True
    assert trace[-1]["error"] == "error_max_turns"


def test_an_unsubmitted_run_that_hits_the_limit_fails_with_its_conversation(harness: Path, tmp_path: Path) -> None:
    probe = ClaudeTasksBenchmark()
    task = probe.tasks("dev")[0]
    transport = FakeTransport(
        [assistant("Still reading the ledger."), result("error_max_turns", is_error=True, turns=12)], exit_code=1
    )
    out = bench_with(transport).run(harness, task, seed=0, trace_dir=tmp_path / "traces")
    assert (out.passed, out.disposition) == (False, "task_failure")
    assert "submitted no answer" in out.rationale and "Still reading the ledger." in out.rationale
    assert out.error_tail == "error_max_turns"


def test_a_crash_before_any_result_is_still_a_crash(harness: Path, tmp_path: Path) -> None:
    probe = ClaudeTasksBenchmark()
    task = probe.tasks("dev")[0]
    out = bench_with(FakeTransport([assistant("starting")], exit_code=1)).run(
        harness, task, seed=0, trace_dir=tmp_path / "traces"
    )
    assert (out.passed, out.rationale) == (False, "the agent crashed")
    assert "exit code 1" in out.error_tail

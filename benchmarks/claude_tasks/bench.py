"""The `claude-tasks` Benchmark: runs the harness's `agent.run_task` on one ledger question and grades it."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.claude_tasks.data import SPLITS, grade, ledger_csv, policy_md, questions
from saddler.benchmark import BankPatch, BenchmarkBase, RolloutResult, Symptom, Task

GRADER_VERSION = "1"
_HARNESS_MODULES = ("agent", "settings", "tools", "hooks")


def _import(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


class ClaudeTasksBenchmark(BenchmarkBase):
    """Ledger questions for a claude-agent-sdk harness (see the package docstring).

    `transport` ("module:factory" or a callable returning an SDK `Transport`) replaces the real CLI,
    for tests and remote runners; without it a rollout needs ANTHROPIC_API_KEY.
    """

    name = "claude-tasks"
    trace_format = (
        "JSON lines: the task prompt (`kind` task), every SDK message of the agent (`kind` message), then the "
        "outcome with the grader's verdict (`kind` outcome)."
    )
    score_kind = "pass_rate"
    metric = None

    def __init__(self, transport: str | Callable[[], Any] | None = None) -> None:
        factory = _import(transport) if isinstance(transport, str) else transport
        self.transport_factory: Callable[[], Any] | None = factory
        self._questions = {q.task_id: q for group in SPLITS for q in questions(group)}

    def tasks(self, split: str) -> list[Task]:
        return [
            Task(id=q.task_id, group=q.group, split=SPLITS[q.group], family=q.family, prompt=q.prompt)
            for q in self._questions.values()
            if SPLITS[q.group] == split
        ]

    def fingerprint(self) -> str:
        data = json.dumps([(q.task_id, q.prompt, q.expected) for q in self._questions.values()], sort_keys=True)
        return hashlib.sha256(f"{GRADER_VERSION}:{data}".encode()).hexdigest()[:16]

    def model_fingerprint(self) -> str:
        try:
            from claude_agent_sdk import __version__
        except ImportError:  # pragma: no cover - the SDK is a dependency
            __version__ = "missing"
        return f"claude-agent-sdk {__version__}"

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        question = self._questions[task.id]
        trace_dir.mkdir(parents=True, exist_ok=True)
        trace_path = trace_dir / f"{task.id}-s{seed}.jsonl"
        started = time.monotonic()
        if self.transport_factory is None and not (
            os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("CLAUDE_CODE_OAUTH_TOKEN")
        ):
            return RolloutResult(
                task.id,
                0.0,
                False,
                "infra_error",
                error_tail="ANTHROPIC_API_KEY is not set: claude-tasks runs a real model",
            )
        with tempfile.TemporaryDirectory(prefix="claude-tasks-") as tmp:
            workspace = Path(tmp)
            (workspace / "ledger.csv").write_text(ledger_csv(question.group, seed), encoding="utf-8")
            (workspace / "policy.md").write_text(policy_md(question.group), encoding="utf-8")
            try:
                agent = _load_agent(Path(harness_dir))
                transport = self.transport_factory() if self.transport_factory else None
                out = agent.run_task(question.prompt, workspace, transport=transport)
            except Exception as exc:  # a broken harness is data: the rollout fails with its error
                tail = "".join(traceback.format_exception(exc))[-2000:]
                _write_trace(trace_path, question.prompt, [], {"error": tail})
                auth = "authentication" in str(exc).lower() or "api key" in str(exc).lower()
                return RolloutResult(
                    task.id,
                    0.0,
                    False,
                    "infra_error" if auth else "task_failure",
                    duration_s=round(time.monotonic() - started, 3),
                    trace_path=str(trace_path),
                    error_tail=tail,
                    rationale="the agent crashed",
                    failure_file="agent.py",
                )
        answer = str(out.get("answer", ""))
        submitted = bool(out.get("submitted", bool(answer)))
        passed = grade(question.expected, answer)
        rationale = "" if passed else f"expected {question.expected!r}, the agent answered {answer!r}"
        if not passed and not submitted:
            rationale = f"expected {question.expected!r}, the agent submitted no answer (last words: {answer[:200]!r})"
        _write_trace(
            trace_path,
            question.prompt,
            out.get("messages", []),
            {"answer": answer, "expected": question.expected, "passed": passed, "error": out.get("error", "")},
        )
        auth_error = out.get("error") in ("authentication_failed", "billing_error")
        return RolloutResult(
            task_id=task.id,
            score=1.0 if passed else 0.0,
            passed=passed,
            disposition="success" if passed else ("infra_error" if auth_error else "task_failure"),
            cost=float(out.get("cost_usd") or 0.0),
            llm_calls=int(out.get("turns") or 0),
            duration_s=round(time.monotonic() - started, 3),
            trace_path=str(trace_path),
            error_tail=str(out.get("error") or ""),
            rationale=rationale,
            failure_file=None if passed else ("tools/workspace.py" if submitted else "prompts/system.md"),
        )

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        if result.passed:
            return []
        code = "no_answer" if "no answer" in result.rationale else "wrong_answer"
        return [Symptom(code, result.task_id, result.failure_file, result.rationale)]

    def patch_bank(self) -> list[BankPatch]:
        return []


def _load_agent(harness_dir: Path) -> Any:
    """Import the harness's `agent` module fresh from `harness_dir` (its own tools/hooks/settings)."""
    for name in list(sys.modules):
        if name.split(".")[0] in _HARNESS_MODULES:
            del sys.modules[name]
    sys.path.insert(0, str(harness_dir))
    try:
        return importlib.import_module("agent")
    finally:
        sys.path.remove(str(harness_dir))


def _write_trace(path: Path, prompt: str, messages: list[Any], outcome: dict[str, Any]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"kind": "task", "prompt": prompt}) + "\n")
        for message in messages:
            fh.write(json.dumps({"kind": "message", **message}, default=str) + "\n")
        fh.write(json.dumps({"kind": "outcome", **outcome}, default=str) + "\n")

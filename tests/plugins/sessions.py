"""Fixtures for the LLM-backend tests: a real git harness worktree and the three session requests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from gitrepo import init_commit

from saddler.sessions.schema import (
    DiagnosisRequest,
    EdgeInfo,
    EvolutionRequest,
    Hypothesis,
    NodeInfo,
    ReflectionRequest,
    TaskEvidence,
    TaskTransition,
)

HARNESS_FILES = {
    "saddler.toml": '[harness]\nname = "mini"\n',
    "tools/search.py": "def search(query):\n    return []\n",
    "prompts/system.md": "You are a helpful agent.\n",
    "eval/grader.py": "def grade(answer):\n    return answer == 42\n",
}
COMPONENTS = {
    "capability": ["tools/**"],
    "steering": ["prompts/**"],
    "protected": ["eval/**", "saddler.toml"],
}


def session_paths(run_dir: Path) -> dict[str, object]:
    """Where a session of a run at `run_dir` works, as `RunContext.session_paths` says it."""
    readable = [run_dir / p for p in ("saddler.toml", "harness", "worktrees", "traces", "sessions")]
    return {"run_dir": str(run_dir), "db_path": str(run_dir / "sessions" / "evodag-view.sqlite"),
            "readable": [str(p) for p in readable]}  # fmt: skip


def _make_worktree(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in HARNESS_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    init_commit(root)
    return root


def _diagnosis_request(
    run_dir: Path, worktree: Path, *, exploration: bool = False, iteration: int = 3
) -> DiagnosisRequest:
    trace = run_dir / "traces" / "t1.jsonl"
    trace.parent.mkdir(parents=True, exist_ok=True)
    trace.write_text('{"step": 1, "tool": "search", "result": []}\n', encoding="utf-8")
    return DiagnosisRequest(
        **session_paths(run_dir),  # type: ignore[arg-type]
        worktree=str(worktree),
        iteration=iteration,
        parent_node_id=1,
        phase="capability",
        allowed_kinds=["capability"],
        component_globs=COMPONENTS,
        evidence=[
            TaskEvidence(
                task_id="t1",
                group="g1",
                family="lookup",
                seed=7,
                score=0.0,
                passed=False,
                disposition="task_failure",
                rationale="expected 3 results, agent returned none",
                trace_path=str(trace),
                failure_file="tools/search.py",
            ),
            TaskEvidence(task_id="t2", group="g1", score=1.0, passed=True, disposition="success"),
        ],
        exploration=exploration,
        check_command="python -m compileall -q .",
    )


def _reflection_request(run_dir: Path, iteration: int = 3) -> ReflectionRequest:
    return ReflectionRequest(
        **session_paths(run_dir),  # type: ignore[arg-type]
        iteration=iteration,
        parent_node_id=1,
        candidate_node_id=2,
        decision="accepted",
        hypothesis=Hypothesis(diagnosis="search returns nothing", plan="implement search", patch_kind="capability"),
        diff="--- a/tools/search.py\n+++ b/tools/search.py\n@@ -1,2 +1,2 @@\n-    return []\n+    return [1, 2, 3]\n",
        files_changed=["tools/search.py"],
        transitions=[
            TaskTransition(task_id="t1", before=[False], after=[True], after_trace_paths=["traces/t1-after.jsonl"]),
            TaskTransition(task_id="t2", before=[True], after=[True]),
        ],
        parent_dev_mean=0.5,
        candidate_dev_mean=0.625,
        best_dev_mean=0.5,
    )


def _evolution_request(run_dir: Path, iteration: int = 3) -> EvolutionRequest:
    return EvolutionRequest(
        **session_paths(run_dir),  # type: ignore[arg-type]
        iteration=iteration,
        current_node_id=3,
        best_node_id=2,
        nodes=[
            NodeInfo(node_id=1, parent_id=None, status="baseline", dev_mean=0.5),
            NodeInfo(node_id=2, parent_id=1, status="accepted", dev_mean=0.625, iteration=1),
            NodeInfo(node_id=3, parent_id=2, status="rejected", iteration=2),
        ],
        edges=[
            EdgeInfo(edge_id=1, parent_id=1, child_id=2, kind="patch", fixed=["t1"], true_fixes=["t1"]),
            EdgeInfo(edge_id=2, parent_id=2, child_id=3, kind="patch", regressed=["t2"], true_regressions=["t2"]),
        ],
        lineage_edge_ids={2: [1], 3: [1, 2]},
        failing_train_tasks={3: ["t2"]},
    )


@pytest.fixture(scope="session")
def make_worktree() -> Callable[[Path], Path]:
    """`make_worktree(root)`: a committed git repository at `root` holding a tiny harness (tools/search.py,
    prompts/system.md, the protected eval/grader.py); returns `root`."""
    return _make_worktree


@pytest.fixture(scope="session")
def diagnosis_request() -> Callable[..., DiagnosisRequest]:
    """`diagnosis_request(run_dir, worktree, *, exploration=False, iteration=3)`: a capability-phase request with
    one failing task (its trace written under run_dir/traces) and one passing task."""
    return _diagnosis_request


@pytest.fixture(scope="session")
def reflection_request() -> Callable[..., ReflectionRequest]:
    """`reflection_request(run_dir, iteration=3)`: an accepted candidate that fixed t1 and kept t2."""
    return _reflection_request


@pytest.fixture(scope="session")
def evolution_request() -> Callable[..., EvolutionRequest]:
    """`evolution_request(run_dir, iteration=3)`: three nodes (baseline, accepted, rejected) and their edges."""
    return _evolution_request

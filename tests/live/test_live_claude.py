"""Live: real claude-agent-sdk sessions and a real task rollout (skipped without --run-live and a key).

Each test caps its spend with a small `max_budget_usd` and few turns. The command presets (claude -p, codex,
pi) run the same scenario in test_live_presets.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from benchmarks.claude_tasks import ClaudeTasksBenchmark
from saddler.config import SessionConfig
from saddler.resources import template_path
from saddler.sessions.claude import ClaudeBackend

pytestmark = pytest.mark.live
CHEAP = {"model": "claude-haiku-4-5", "max_turns": 8, "max_budget_usd": 0.25, "retries": 1, "timeout_s": 300.0}


def test_live_claude_backend_runs_all_three_sessions(
    outside: Path,
    diagnosis_request: Callable[..., Any],
    evolution_request: Callable[..., Any],
    make_worktree: Callable[[Path], Path],
    reflection_request: Callable[..., Any],
) -> None:
    tmp_path = outside  # a run folder outside /tmp, like the presets' scenario
    backend = ClaudeBackend(SessionConfig(backend="claude", **CHEAP), benchmark=None, run_dir=tmp_path / "run", seed=0)
    wt = make_worktree(tmp_path / "run" / "worktrees" / "c1")
    diag = backend.diagnose_patch(diagnosis_request(tmp_path / "run", wt))
    assert diag.stats.cost_usd > 0 and diag.stats.turns > 0
    assert diag.status in ("patched", "no_patch", "failed")
    assert (
        "eval/grader.py"
        not in subprocess.run(
            ["git", "status", "--porcelain"], cwd=wt, capture_output=True, text=True, check=True
        ).stdout
    )
    refl = backend.reflect(reflection_request(tmp_path / "run"))
    assert refl.stats.cost_usd > 0
    evo = backend.evolve(evolution_request(tmp_path / "run"))
    assert evo.action in ("continue", "rebase", "cherry_pick", "revert")


def test_live_claude_tasks_rollout(tmp_path: Path) -> None:
    harness = tmp_path / "harness"
    shutil.copytree(template_path("claude_agent"), harness)
    bench = ClaudeTasksBenchmark()
    task = next(t for t in bench.tasks("train") if t.family == "policy_limit")
    out = bench.run(harness, task, seed=0, trace_dir=tmp_path / "traces")
    assert out.disposition in ("success", "task_failure") and out.cost > 0

"""Live: the same scenario through every command preset against the real CLI and API (claude -p, codex exec,
pi), skipped without `--run-live`, the CLI on PATH, or its key. Each session is capped (turns, budget, time).

Scenario: a tiny harness whose search tool is a stub; diagnosis in a worktree inside a run folder outside /tmp,
then reflection and evolution. Checked: every answer parsed (or a known limit reached), the protected grader
untouched, nothing written in the run folder outside the worktree and the session files, and the sandbox the
preset promises (codex read-only outside diagnosis, pi confined by bubblewrap). Models can be overridden with
SADDLER_LIVE_MODEL_<PRESET> (e.g. SADDLER_LIVE_MODEL_CODEX=gpt-5-codex).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from saddler.sessions import confine

MODELS = {"claude": "claude-haiku-4-5", "codex": "gpt-5-codex", "pi": "claude-haiku-4-5"}
KEYS = {"claude": ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"), "codex": ("OPENAI_API_KEY", "CODEX_API_KEY"),
        "pi": ("ANTHROPIC_API_KEY",)}  # fmt: skip
OK = ("ok", "no_patch", "failed:unparsable_output", "failed:max_turns", "failed:budget", "failed:timeout")


def preset_param(name: str) -> object:
    marks = [
        pytest.mark.live(keys=KEYS[name]),
        pytest.mark.skipif(shutil.which(name) is None, reason=f"the {name} CLI is not on PATH"),
    ]
    if name == "pi":
        marks.append(pytest.mark.skipif(not confine.bwrap_works()[0], reason="pi runs confined: needs bubblewrap"))
    return pytest.param(name, marks=marks, id=name)


def files_outside(run_dir: Path, worktree: Path) -> set[str]:
    return {
        p.relative_to(run_dir).as_posix()
        for p in run_dir.rglob("*")
        if p.is_file() and worktree not in p.parents and "sessions" not in p.relative_to(run_dir).parts
    }


@pytest.mark.parametrize("preset", [preset_param(n) for n in ("claude", "codex", "pi")])
def test_live_preset_runs_the_three_sessions(
    outside: Path,
    preset: str,
    command_backend: Callable[..., Any],
    diagnosis_request: Callable[..., Any],
    evolution_request: Callable[..., Any],
    make_worktree: Callable[[Path], Path],
    reflection_request: Callable[..., Any],
) -> None:
    run_dir = outside / "run"
    wt = make_worktree(run_dir / "worktrees" / "c1")
    requests = diagnosis_request(run_dir, wt), reflection_request(run_dir), evolution_request(run_dir)
    before = files_outside(run_dir, wt)
    model = os.environ.get(f"SADDLER_LIVE_MODEL_{preset.upper()}", MODELS[preset])
    b = command_backend(run_dir, preset, model=model, max_turns=12, max_budget_usd=0.3, timeout_s=600.0)
    diag = b.diagnose_patch(requests[0])
    assert diag.stats.outcome in OK, diag.stats.error
    status = subprocess.run(["git", "status", "--porcelain"], cwd=wt, capture_output=True, text=True).stdout
    assert "eval/grader.py" not in status and "saddler.toml" not in status
    refl = b.reflect(requests[1])
    assert refl.stats.outcome in OK, refl.stats.error
    evo = b.evolve(requests[2])
    assert evo.action in ("continue", "rebase", "cherry_pick", "revert")
    assert files_outside(run_dir, wt) == before
    assert diag.stats.turns > 0 or diag.stats.tokens_in > 0

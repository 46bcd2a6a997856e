"""Skill mode with the claude backend, against a fake `claude` CLI on PATH (no API is ever called): the task
agent gets the skill as system prompt, the judge and the mutator are driven through the same CLI."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from evodag.store import EvoDAG
from saddler.errors import BackendError
from saddler.modes.skill.loop import SkillRun
from saddler.modes.skill.program import SkillOptions

FAKE = FIXTURES / "skill_agent" / "fake_claude.py"


@pytest.mark.slow
def test_claude_backend_runs_agent_judge_and_mutator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skill_repo: Callable[..., Path]
) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copyfile(FAKE, bindir / "claude")
    (bindir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    out = SkillRun(skill_repo(tmp_path), options=SkillOptions(backend="claude", max_iterations=5)).run()
    # the obedient fake agent fails exactly the keywords SKILL.md lacks; the fake judge passes the findings eval
    assert out.baseline_pass_rate == pytest.approx((1 + 0 + 0 + 1) / 4)
    assert out.final_pass_rate == 1.0 and out.termination_reason == "target_achieved" and out.kept == 3
    for line in (
        "- Name the vectors checked: SQL injection, XSS.",
        "- End with APPROVE or REQUEST_CHANGES.",
        "- A migration review includes a rollback plan.",
    ):
        assert line in out.best_text
    log = json.loads((out.workspace / "autoresearch-log.json").read_text(encoding="utf-8"))
    assert [it["strategy_type"] for it in log["iterations"]] == ["missing", "missing", "missing"]
    with EvoDAG(out.workspace / "evodag.sqlite", readonly=True) as store:
        assert store.rollout_cost() == pytest.approx(0.01 * len(store.rollouts()))
        assert {s.backend for s in store.sessions()} == {"claude"}


def test_claude_backend_without_the_cli_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skill_repo: Callable[..., Path]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    skill_dir = skill_repo(tmp_path, git=False)
    with pytest.raises(BackendError, match="not found on PATH; install it or use --backend offline"):
        SkillRun(skill_dir, options=SkillOptions(backend="claude"))
    assert not (skill_dir.parent / "code-review-autoresearch").exists()  # failed before touching anything

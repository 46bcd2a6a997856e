"""Skill mode survives a kill anywhere (the 000 seed's 0-2: an unfinished workspace is continued from its
autoresearch-log.json): a killed-and-resumed run tries exactly the ideas of an uninterrupted one, none twice,
and ends with the same score; a kill while the workspace is being created never leaves it stuck."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from repo_paths import FIXTURES

from evodag.store import EvoDAG
from saddler.harness.space import HarnessSpace
from saddler.modes.skill import workspace as wsp
from saddler.modes.skill.default_strategy import OfflineMutator
from saddler.modes.skill.loop import SkillOutcome, SkillRun
from saddler.modes.skill.mutator import Mutation, MutationState
from saddler.modes.skill.program import SkillOptions

pytestmark = pytest.mark.slow
WORKSPACES = FIXTURES / "skill_workspaces"


def _workspace(tmp_path: Path, program: str | None) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True)
    if program:
        shutil.copyfile(WORKSPACES / program, ws / "program.md")
    return ws


def _ideas(ws: Path) -> list[tuple[int, str, str, float]]:
    log = json.loads((ws / "autoresearch-log.json").read_text(encoding="utf-8"))
    return [(e["iteration"], e["hypothesis"], e["decision"], e["pass_rate"]) for e in log["iterations"]]


class DiesAt(OfflineMutator):
    """The offline mutator, killed (like the process) when asked for iteration `at`."""

    def __init__(self, at: int) -> None:
        self.at = at

    def propose(self, state: MutationState) -> Mutation | None:
        if state.iteration == self.at:
            raise KeyboardInterrupt
        return super().propose(state)


def _kill_after_evaluation(monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    """Killed once iteration `at`'s candidate was evaluated, before its grading files were written."""
    real = wsp.SkillWorkspace.write_evals

    def dying(self: wsp.SkillWorkspace, n: int, results: Any) -> None:
        if n == at:
            raise KeyboardInterrupt
        real(self, n, results)

    monkeypatch.setattr(wsp.SkillWorkspace, "write_evals", dying)


def _kill_before_logging(monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    """Killed after iteration `at` was decided and stored, before its autoresearch-log.json entry was written."""
    real = wsp.SkillWorkspace.write_log

    def dying(self: wsp.SkillWorkspace, log: dict[str, Any]) -> None:
        if len(log["iterations"]) == at and log.get("completed_at") is None:
            raise KeyboardInterrupt
        real(self, log)

    monkeypatch.setattr(wsp.SkillWorkspace, "write_log", dying)


CASES = [
    ("program-discards.md", "propose", 3),
    ("program-discards.md", "evaluated", 2),
    ("program-discards.md", "logged", 4),
    (None, "propose", 4),
    (None, "logged", 3),
]


@pytest.mark.parametrize(("program", "kill", "at"), CASES)
def test_a_killed_run_resumes_with_the_same_ideas_and_score(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    program: str | None,
    kill: str,
    at: int,
    skill_repo: Callable[..., Path],
) -> None:
    opts = SkillOptions(max_iterations=10)
    ws_a = _workspace(tmp_path / "a", program)
    straight = SkillRun(skill_repo(tmp_path / "a"), ws_a, opts).run()
    assert straight.iterations >= at
    ws_b = _workspace(tmp_path / "b", program)
    skill_dir = skill_repo(tmp_path / "b")
    mutator: OfflineMutator = OfflineMutator()
    if kill == "propose":
        mutator = DiesAt(at)
    elif kill == "evaluated":
        _kill_after_evaluation(monkeypatch, at)
    else:
        _kill_before_logging(monkeypatch, at)
    with pytest.raises(KeyboardInterrupt):
        SkillRun(skill_dir, ws_b, opts, mutator=mutator).run()
    monkeypatch.undo()
    resumed = SkillRun(skill_dir, ws_b, opts).run()
    assert _ideas(ws_b) == _ideas(ws_a)
    hypotheses = [h for _, h, _, _ in _ideas(ws_b)]
    assert len(hypotheses) == len(set(hypotheses))  # no idea tried twice
    assert (resumed.final_pass_rate, resumed.termination_reason, resumed.best_text) == (
        straight.final_pass_rate,
        straight.termination_reason,
        straight.best_text,
    )
    with EvoDAG(ws_b / "evodag.sqlite", readonly=True) as store:
        run = store.get_run()
        assert run.status == "finished"
        kept = [n for n in store.nodes(run.id) if n.status in ("accepted", "neutral")]
        assert len(kept) == resumed.kept  # the interrupted attempt is not counted as a kept candidate
        assert store.get_node(run.best_node_id or 0).commit == kept[-1].commit if kept else True


def test_the_seed_program_run_is_not_cut_short_by_a_kill(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    """The issue's case: with a program.md, a kill at iteration 3 made iterations 3-4 repeat 1-2 and the run
    ended at stall (0.25 here) instead of reaching the target."""
    ws = _workspace(tmp_path, "program-discards.md")
    skill_dir = skill_repo(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        SkillRun(skill_dir, ws, SkillOptions(), mutator=DiesAt(3)).run()
    out = SkillRun(skill_dir, ws, SkillOptions()).run()
    decisions = [(i, d) for i, _, d, _ in _ideas(ws)]
    assert decisions[:3] == [(1, "DISCARD"), (2, "DISCARD"), (3, "KEEP")]
    assert out.termination_reason == "target_achieved" and out.final_pass_rate == 1.0


def _die_after(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
    """Kill the run right after `owner.name` returns (once)."""
    real = getattr(owner, name)

    def dying(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        monkeypatch.setattr(owner, name, real)
        raise KeyboardInterrupt

    monkeypatch.setattr(owner, name, dying if not isinstance(real, classmethod) else classmethod(dying))


def _kill_after_repo_created(monkeypatch: pytest.MonkeyPatch) -> None:
    real = HarnessSpace.create.__func__  # type: ignore[attr-defined]

    def dying(cls: type[HarnessSpace], *args: Any, **kwargs: Any) -> HarnessSpace:
        real(cls, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(HarnessSpace, "create", classmethod(dying))


def _kill_in_baseline_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    def dying(self: SkillRun, text: str) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(SkillRun, "evaluate", dying)


def _kill_while_moving_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the first item of a completed start was moved into the workspace."""
    import os

    real = os.replace
    moved: list[str] = []

    def dying(src: Any, dst: Any) -> None:
        real(src, dst)
        moved.append(str(dst))
        if len(moved) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", dying)


KILLS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "repo created": _kill_after_repo_created,
    "baseline evaluation": _kill_in_baseline_evaluation,
    "moving in": _kill_while_moving_in,
}


@pytest.mark.parametrize("kill", list(KILLS))
def test_a_kill_while_the_workspace_is_created_never_leaves_it_stuck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill: str, skill_repo: Callable[..., Path]
) -> None:
    straight: SkillOutcome = SkillRun(skill_repo(tmp_path / "a"), options=SkillOptions(max_iterations=3)).run()
    skill_dir = skill_repo(tmp_path / "b")
    KILLS[kill](monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        SkillRun(skill_dir, options=SkillOptions(max_iterations=3)).run()
    monkeypatch.undo()
    again = SkillRun(skill_dir, options=SkillOptions(max_iterations=3)).run()  # "repo already exists" before
    ws = again.workspace
    assert (again.final_pass_rate, again.best_text, again.iterations) == (
        straight.final_pass_rate,
        straight.best_text,
        straight.iterations,
    )
    assert sorted(p.name for p in ws.iterdir() if not p.name.startswith("iteration-")) == sorted(
        p.name for p in straight.workspace.iterdir() if not p.name.startswith("iteration-")
    )  # nothing left over, nothing archived: the interrupted start left no trace
    with EvoDAG(ws / "evodag.sqlite", readonly=True) as store:
        assert len({n.run_id for n in store.nodes()}) == 1 and store.get_run().status == "finished"


def test_a_finished_run_is_archived_and_nothing_of_the_users_moves(
    tmp_path: Path, skill_repo: Callable[..., Path]
) -> None:
    ws = _workspace(tmp_path, "program-discards.md")
    (ws / "notes.md").write_text("my notes\n", encoding="utf-8")
    skill_dir = skill_repo(tmp_path)
    SkillRun(skill_dir, ws, SkillOptions(max_iterations=1)).run()
    SkillRun(skill_dir, ws, SkillOptions(max_iterations=1)).run()  # finished before: archived, a new run
    archived = {p.name for p in (ws / "previous" / "1").iterdir()}
    assert {"autoresearch-log.json", "iteration-0", "iteration-1", "repo", "evodag.sqlite", "report.md"} <= archived
    assert "notes.md" not in archived and "program.md" not in archived
    assert (ws / "notes.md").read_text(encoding="utf-8") == "my notes\n" and (ws / "program.md").is_file()

"""Skill mode end to end, offline: an incomplete SKILL.md improves, every file of the seed's workspace layout is
written, broken mutations are rejected before evaluation, exclusions and NEUTRAL approval work, apply commits."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.errors import ConfigError
from saddler.files import atomic_path
from saddler.modes.skill.apply import apply_best
from saddler.modes.skill.default_strategy import OfflineMutator
from saddler.modes.skill.loop import SkillRun
from saddler.modes.skill.mutator import Mutation, MutationState
from saddler.modes.skill.program import SkillOptions
from saddler.modes.skill.workspace import SkillWorkspace, report_from_files
from saddler.reporting.figures import build_report
from saddler.reporting.results_tsv import result_rows

pytestmark = pytest.mark.slow


def clock() -> str:
    clock.t += 1  # type: ignore[attr-defined]
    return f"2026-03-26T10:{clock.t // 60:02d}:{clock.t % 60:02d}"  # type: ignore[attr-defined]


clock.t = 0  # type: ignore[attr-defined]


def test_offline_run_improves_the_skill_and_writes_the_seed_workspace(
    tmp_path: Path, skill_repo: Callable[..., Path]
) -> None:
    skill_dir = skill_repo(tmp_path)
    original = (skill_dir / "SKILL.md").read_text(encoding="utf-8")
    out = SkillRun(skill_dir, options=SkillOptions(max_iterations=10), clock=clock).run()
    ws = out.workspace
    assert ws == tmp_path / "repo" / "code-review-autoresearch"
    assert out.final_pass_rate > out.baseline_pass_rate
    assert (skill_dir / "SKILL.md").read_text(encoding="utf-8") == original  # untouched until apply
    assert (ws / "iteration-0" / "SKILL.md.bak").read_text(encoding="utf-8") == original
    base = json.loads((ws / "iteration-0" / "benchmark.json").read_text(encoding="utf-8"))
    assert {"iteration", "type", "mean_pass_rate", "per_eval", "assertion_baseline"} <= set(base)
    assert base["type"] == "baseline" and base["mean_pass_rate"] == out.baseline_pass_rate
    assert base["assertion_baseline"]["login-security"] == {"security_vectors": False, "verdict": False}
    log = json.loads((ws / "autoresearch-log.json").read_text(encoding="utf-8"))
    assert {
        "skill_name",
        "skill_path",
        "started_at",
        "completed_at",
        "config",
        "baseline_pass_rate",
        "final_pass_rate",
        "total_iterations",
        "kept_mutations",
        "discarded_mutations",
        "termination_reason",
        "iterations",
        "program_md_used",
    } <= set(log)
    assert log["config"] == {"max_iterations": 10, "target_pass_rate": 1.0, "stall_limit": 3, "eval_runs": 2}
    assert log["total_iterations"] == out.iterations == len(log["iterations"]) >= 1
    assert log["kept_mutations"] == out.kept >= 1
    for it in log["iterations"]:
        assert {
            "iteration",
            "hypothesis",
            "strategy_type",
            "pass_rate",
            "delta",
            "outcome",
            "regressions",
            "timestamp",
        } <= set(it)
        folder = ws / f"iteration-{it['iteration']}"
        hyp = (folder / "hypothesis.md").read_text(encoding="utf-8")
        assert hyp.startswith(f"# Iteration {it['iteration']} 가설\n")
        for field in ("**대상 assertion:**", "**분석:**", "**변경 계획:**", "**전략 유형:**"):
            assert field in hyp
        assert (folder / "SKILL.md").is_file()
        for name in ("single-file-routing", "login-security", "migration-rollback", "findings-format"):
            assert (folder / f"eval-{name}" / "output.md").is_file()
            grading = json.loads((folder / f"eval-{name}" / "grading.json").read_text(encoding="utf-8"))
            assert {"eval_id", "eval_name", "run", "assertions", "pass_rate"} <= set(grading)
        bench = json.loads((folder / "benchmark.json").read_text(encoding="utf-8"))
        assert bench["iteration"] == it["iteration"] and bench["mean_pass_rate"] == it["pass_rate"]
    kept = [it for it in log["iterations"] if it["outcome"] == "kept"]
    assert all(float(it["delta"]) > 0 for it in kept)
    final_skill = (ws / f"iteration-{kept[-1]['iteration']}" / "SKILL.md").read_text(encoding="utf-8")
    assert final_skill == out.best_text
    report = (ws / "report.md").read_text(encoding="utf-8")
    for header in (
        "# Autoresearch Report: code-review",
        "## 결과 요약",
        "| 메트릭 | Baseline | Final | Delta |",
        "## 효과적이었던 Mutations",
        "## Assertion-Level 변화",
        "## 실패한 Mutations (참고용)",
        f"| Mean Pass Rate | {out.baseline_pass_rate:.2f} | {out.final_pass_rate:.2f} |",
    ):
        assert header in report
    assert report_from_files(ws) == report
    result = json.loads(next((ws / "logs").glob("*/result.json")).read_text(encoding="utf-8"))
    assert result["finalPassRate"] == out.final_pass_rate and result["terminationReason"] == out.termination_reason
    # the EvoDAG holds the run like any other
    with EvoDAG(ws / "evodag.sqlite", readonly=True) as store:
        run = store.get_run()
        assert run.status == "finished" and run.termination_reason == out.termination_reason
        nodes = store.nodes(run.id)
        assert nodes[0].status == "baseline"
        assert sum(n.status == "accepted" for n in nodes) == out.kept
        rollouts = store.rollouts(run.id)
        grading_runs = sum(json.loads(p.read_text())["run"] for p in ws.glob("iteration-*/eval-*/grading.json"))
        assert len(rollouts) == grading_runs
        assert len(store.edges(run.id)) == len(nodes) - 1
        figures = build_report(store)
        assert figures["counts"]["accepted"] == out.kept
        assert figures["best"]["commit"] == store.get_node(run.best_node_id or 0).commit
        rows = result_rows(store)
        assert rows[0][2] == "keep" and rows[0][3] == "baseline"
        assert [r[2] for r in rows[1:]].count("keep") == out.kept


class BadThenGood:
    """Test-only mutator: breaks the frontmatter, then drops an H2, then behaves like the offline mutator."""

    name = "bad-then-good"

    def __init__(self) -> None:
        self.good = OfflineMutator()
        self.attempts: list[int] = []

    def propose(self, state: MutationState) -> Mutation | None:
        self.attempts.append(state.attempt)
        text = state.skill_text
        if state.iteration == 1 and state.attempt == 0:
            return Mutation(
                "bad:frontmatter",
                "structural",
                "t",
                "a",
                "rewrite frontmatter",
                text.replace("---\nname:", "--\nname:", 1),
            )
        if state.iteration == 1 and state.attempt == 1:
            return Mutation("bad:h2", "excess", "t", "a", "drop the Output section", text.replace("## Output\n", ""))
        return self.good.propose(state)


def test_broken_mutations_are_rejected_and_retried(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    mutator = BadThenGood()
    out = SkillRun(skill_repo(tmp_path), options=SkillOptions(max_iterations=1), mutator=mutator, clock=clock).run()
    assert mutator.attempts == [0, 1, 2]
    hyp = (out.workspace / "iteration-1" / "hypothesis.md").read_text(encoding="utf-8")
    assert "frontmatter" in hyp and "H2 heading removed: ## Output" in hyp
    with EvoDAG(out.workspace / "evodag.sqlite", readonly=True) as store:
        nodes = store.nodes()
        invalid = [n for n in nodes if n.status == "invalid"]
        assert len(invalid) == 2
        assert "frontmatter" in invalid[0].status_reason and "## Output" in invalid[1].status_reason
        assert all(not store.rollouts(node_id=n.id) for n in invalid)  # never evaluated
        assert len([n for n in nodes if n.status not in ("invalid", "baseline")]) == 1


class AlwaysBroken:
    name = "always-broken"

    def propose(self, state: MutationState) -> Mutation | None:
        return Mutation(
            f"bad:{state.attempt}",
            "structural",
            "t",
            "a",
            f"break {state.attempt}",
            state.skill_text.replace("## Verdict", "## Verdict " + "x" * state.attempt + "!"),
        )


def test_three_failed_validations_discard_the_iteration(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    out = SkillRun(
        skill_repo(tmp_path), options=SkillOptions(max_iterations=5, stall_limit=2), mutator=AlwaysBroken(), clock=clock
    ).run()
    assert out.termination_reason == "stall_limit" and out.iterations == 2 and out.kept == 0
    log = json.loads((out.workspace / "autoresearch-log.json").read_text(encoding="utf-8"))
    assert log["iterations"][0]["reason"].startswith("rejected before evaluation: SKILL.md: H2 heading removed")
    with EvoDAG(out.workspace / "evodag.sqlite", readonly=True) as store:
        assert [n.status for n in store.nodes()].count("invalid") == 6


class IgnoresExclusions(OfflineMutator):
    """The offline mutator blind to mutation exclusions (as an LLM mutator may be): the loop must catch them."""

    def propose(self, state: MutationState) -> Mutation | None:
        return super().propose(replace(state, program=replace(state.program, exclusions=[])))


def test_exclusions_discard_without_evaluation(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    skill_dir = skill_repo(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "program.md").write_text(
        'mutation_exclusions:\nexclusions:\n  - pattern: "SQL injection"\n    reason: "the API must change first"\n',
        encoding="utf-8",
    )
    out = SkillRun(skill_dir, ws, SkillOptions(max_iterations=2), mutator=IgnoresExclusions(), clock=clock).run()
    with EvoDAG(ws / "evodag.sqlite", readonly=True) as store:
        excluded = [n for n in store.nodes() if n.status_reason.startswith("excluded mutation: SQL injection")]
        assert excluded and all(not store.rollouts(node_id=n.id) for n in excluded)
    assert "SQL injection" not in out.best_text
    aware = SkillRun(skill_repo(tmp_path / "aware"), tmp_path / "ws2", SkillOptions(max_iterations=2)).run()
    assert "SQL injection" in aware.best_text  # without the exclusion the same run adds it
    (tmp_path / "ws3").mkdir()
    (tmp_path / "ws3" / "program.md").write_text((ws / "program.md").read_text(encoding="utf-8"), encoding="utf-8")
    skips = SkillRun(skill_repo(tmp_path / "skips"), tmp_path / "ws3", SkillOptions(max_iterations=2)).run()
    with EvoDAG(tmp_path / "ws3" / "evodag.sqlite", readonly=True) as store:
        assert not [n for n in store.nodes() if n.status_reason.startswith("excluded")]  # never proposed
    assert "SQL injection" not in skips.best_text


def test_neutral_needs_approval(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    skill_dir = skill_repo(tmp_path)
    program = '- [structural] Replace "Look at naming and readability." with "Look at naming, then readability."\n'
    results = {}
    for approve in (False, True):
        ws = tmp_path / f"ws-{approve}"
        ws.mkdir()
        (ws / "program.md").write_text(program, encoding="utf-8")
        seen: list[str] = []

        def approver(diff: str, seen: list[str] = seen, answer: bool = approve) -> bool:
            seen.append(diff)
            return answer

        out = SkillRun(skill_dir, ws, SkillOptions(max_iterations=1), approve=approver, clock=clock).run()
        log = json.loads((ws / "autoresearch-log.json").read_text(encoding="utf-8"))
        results[approve] = (log["iterations"][0], out, seen)
    rejected, accepted = results[False], results[True]
    assert rejected[0]["decision"] == "DISCARD" and rejected[0]["reason"].endswith("not approved")
    assert accepted[0]["decision"] == "NEUTRAL" and accepted[0]["outcome"] == "kept"
    assert "\n+- Look at naming, then readability.\n" in accepted[2][0]  # the approver saw the diff
    assert "Look at naming, then readability." in accepted[1].best_text
    assert "Look at naming, then readability." not in rejected[1].best_text


def test_apply_yes_replaces_and_commits_only_on_yes(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    skill_dir = skill_repo(tmp_path)
    out = SkillRun(skill_dir, options=SkillOptions(max_iterations=3), clock=clock).run()
    assert out.best_text != out.original_text
    assert apply_best(out, "no").applied is False
    diff = apply_best(out, "diff")
    assert diff.message.startswith("--- a/SKILL.md\n+++ b/SKILL.md\n")
    assert (skill_dir / "SKILL.md").read_text(encoding="utf-8") == out.original_text
    done = apply_best(out, "yes")
    assert done.applied and done.commit
    assert (skill_dir / "SKILL.md").read_text(encoding="utf-8") == out.best_text
    repo = skill_dir.parent
    shown = subprocess.run(
        ["git", "show", "--name-only", "--format=%s", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert shown[0].startswith("autoresearch: code-review SKILL.md pass rate")
    assert [p for p in shown[1:] if p] == ["code-review/SKILL.md"]
    with pytest.raises(ConfigError):
        apply_best(out, "maybe")


def test_workspace_defaults_to_the_repo_root_and_never_sits_inside_the_skill(
    tmp_path: Path, skill_repo: Callable[..., Path]
) -> None:
    skill_dir = skill_repo(tmp_path)
    nested = skill_dir.parent / "skills" / "code-review"
    nested.parent.mkdir()
    skill_dir.rename(nested)
    (nested.parent.parent / "code-review-workspace").rename(nested.parent / "code-review-workspace")
    assert SkillRun(nested).ws.root == tmp_path / "repo" / "code-review-autoresearch"
    with pytest.raises(ConfigError, match="must not be inside the skill folder"):
        SkillRun(nested, nested / "ws")
    subprocess.run(["git", "init", "-q"], cwd=nested, check=True)  # the skill is a repository of its own
    assert SkillRun(nested).ws.root == nested.parent / "code-review-autoresearch"


def test_missing_eval_md_stops_phase_0(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    skill_dir = skill_repo(tmp_path, git=False)
    (skill_dir / "EVAL.md").unlink()
    with pytest.raises(ConfigError, match=r"EVAL\.md를 먼저 작성하세요"):
        SkillRun(skill_dir)


def test_cli_run_json_matches_the_library(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    lib = SkillRun(skill_repo(tmp_path / "a"), options=SkillOptions(max_iterations=4)).run()
    skill_dir = skill_repo(tmp_path / "b")
    res = CliRunner().invoke(app, ["skill", "run", str(skill_dir), "--max-iterations", "4", "--json", "--apply", "no"])
    assert res.exit_code == 0, res.output
    expected = {
        **lib.summary(),
        "workspace": str(skill_dir.parent / "code-review-autoresearch"),
        "apply": {
            "choice": "no",
            "applied": False,
            "commit": None,
            "message": f"kept in the workspace only: {skill_dir.parent / 'code-review-autoresearch'}",
        },
    }
    assert json.loads(res.output) == expected
    again = CliRunner().invoke(app, ["skill", "report", str(skill_dir.parent / "code-review-autoresearch")])
    assert again.exit_code == 0
    assert again.output == (skill_dir.parent / "code-review-autoresearch" / "report.md").read_text(encoding="utf-8")
    ws = skill_dir.parent / "code-review-autoresearch"
    rep = CliRunner().invoke(app, ["report", str(ws), "--json"])  # the general `saddler report` reads it too
    assert rep.exit_code == 0, rep.output
    figures = json.loads(rep.output)
    assert figures["run"]["benchmark"] == "skill-evals" and figures["counts"]["accepted"] == lib.kept
    assert (
        (ws / "results.tsv").read_text(encoding="utf-8").startswith("commit\tmetric\tstatus\tdescription\tscored_on\n")
    )
    bad = CliRunner().invoke(app, ["skill", "run", str(tmp_path / "nowhere"), "--json"])
    assert bad.exit_code == 2 and "SKILL.md not found" in bad.output


class Crashing(OfflineMutator):
    """The offline mutator, dying (like a killed process) when asked for iteration `at`."""

    def __init__(self, at: int) -> None:
        self.at = at

    def propose(self, state: MutationState) -> Mutation | None:
        if state.iteration == self.at:
            raise KeyboardInterrupt
        return super().propose(state)


def test_an_unfinished_run_is_continued_and_a_finished_one_archived(
    tmp_path: Path, skill_repo: Callable[..., Path]
) -> None:
    straight = SkillRun(skill_repo(tmp_path / "a"), options=SkillOptions(max_iterations=10)).run()
    skill_dir = skill_repo(tmp_path / "b")
    with pytest.raises(KeyboardInterrupt):
        SkillRun(skill_dir, options=SkillOptions(max_iterations=10), mutator=Crashing(3)).run()
    ws = skill_dir.parent / "code-review-autoresearch"
    assert json.loads((ws / "autoresearch-log.json").read_text())["completed_at"] is None
    resumed = SkillRun(skill_dir, options=SkillOptions(max_iterations=10)).run()
    assert not (ws / "previous").exists()
    assert resumed.best_text == straight.best_text and resumed.iterations == straight.iterations
    log = json.loads((ws / "autoresearch-log.json").read_text())
    assert [e["iteration"] for e in log["iterations"]] == list(range(1, straight.iterations + 1))
    with EvoDAG(ws / "evodag.sqlite", readonly=True) as store:
        assert [e.kind for e in store.events() if e.kind == "skill.resumed"] == ["skill.resumed"]
        assert store.get_run().status == "finished"
    again = SkillRun(skill_dir, options=SkillOptions(max_iterations=1)).run()  # finished before: a new run
    assert (ws / "previous" / "1" / "autoresearch-log.json").is_file() and again.iterations == 1


def test_force_at_least_one_iteration(tmp_path: Path, skill_repo: Callable[..., Path]) -> None:
    skill_dir = skill_repo(tmp_path)
    plain = SkillRun(skill_dir, tmp_path / "plain", SkillOptions(target_pass_rate=0.2)).run()
    assert plain.termination_reason == "target_achieved" and plain.iterations == 0  # baseline 0.25 >= 0.2
    ws = tmp_path / "forced"
    ws.mkdir()
    (ws / "program.md").write_text(
        'force_at_least_one_iteration: true\n\n- [structural] Make "Fast Mode" required\n', encoding="utf-8"
    )
    forced = SkillRun(skill_dir, ws, SkillOptions(target_pass_rate=0.2, auto_approve_neutral=True)).run()
    assert forced.termination_reason == "target_achieved" and forced.iterations == 1
    log = json.loads((ws / "autoresearch-log.json").read_text(encoding="utf-8"))
    assert log["program_md_used"] is True
    assert log["iterations"][0]["hypothesis"] == 'Make "Fast Mode" required'
    assert log["iterations"][0]["decision"] in ("KEEP", "NEUTRAL")
    assert "- **Required:** A single file review uses Fast Mode." in forced.best_text


def test_a_log_write_left_half_done_by_a_kill_is_archived_with_its_run(tmp_path: Path) -> None:
    ws = SkillWorkspace(tmp_path / "w")
    ws.root.mkdir()
    ws.write_log({"iterations": []})
    with pytest.raises(KeyboardInterrupt), atomic_path(ws.log_path) as tmp:
        raise KeyboardInterrupt
    tmp.write_text("{", encoding="utf-8")  # what a kill between the write and the rename leaves
    archive = ws.prepare()
    assert archive is not None and sorted(p.name for p in archive.iterdir()) == sorted([tmp.name, ws.log_path.name])

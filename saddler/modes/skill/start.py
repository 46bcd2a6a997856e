"""Phases 0-1 of a skill-mode run, built in the workspace's staging folder and moved in when complete (see
`workspace`): the workspace's own git copy of the skill, the EvoDAG run, saddler.toml, the baseline
(`iteration-0/SKILL.md.bak`, its evals, benchmark.json) and, last, autoresearch-log.json."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.skill_evals.grading import CaseResult
from evodag.store import EvoDAG
from saddler.harness.gitcmd import logical_commit_time
from saddler.harness.space import HarnessSpace
from saddler.modes.skill import workspace as wsp
from saddler.modes.skill.program import Program, SkillOptions
from saddler.modes.skill.record import SkillRecorder
from saddler.run.folder import render_run_toml

BASELINE_REPORT = (
    "베이스라인 측정 완료:\n- Mean pass rate: {rate}\n- 실패한 assertions: {failing}\n- Phase 2 반복 실험을 시작합니다."
)


def run_toml(name: str, opts: SkillOptions, evals: str) -> str:
    """W/saddler.toml, so `saddler report W` and `saddler status W` read the workspace like any run folder."""
    return render_run_toml({
        "name": name, "seed": opts.seed, "benchmark": "skill-evals", "harness": "repo",
        "benchmark_options": {"evals": evals, "agent": opts.backend, "holdout": False},
        "loop": {"max_iterations": opts.max_iterations, "stall_limit": opts.stall_limit},
        "sessions": {"backend": "offline"},
    })  # fmt: skip


def start_run(
    ws: wsp.SkillWorkspace,
    source: Any,
    program: Program,
    evaluate: Callable[[str], list[CaseResult]],
    mutator_name: str,
    say: Callable[[str], None],
    clock: Callable[[], str],
) -> dict[str, Any]:
    """Measure the baseline of `source` (a `SkillRun`: skill_dir, skill_md, name, opts, suite) into a fresh
    staging folder and move the result into the workspace (the log last); the log as written."""
    opts: SkillOptions = source.opts
    stage = ws.new_stage()
    original = source.skill_md.read_text(encoding="utf-8")
    space = HarnessSpace.create(
        source.skill_dir, stage.root / "repo", stage.root / "worktrees", clock=lambda: logical_commit_time(0)
    )
    config: dict[str, Any] = {
        "name": source.name, "mode": "skill", "benchmark": "skill-evals", "skill_path": str(source.skill_md),
        "evals": str(source.suite.path), "sessions": {"backend": opts.backend},
        "loop": {"max_iterations": opts.max_iterations, "target_pass_rate": opts.target_pass_rate,
                 "stall_limit": opts.stall_limit, "eval_runs": opts.eval_runs},
    }  # fmt: skip
    with EvoDAG(stage.root / "evodag.sqlite", clock=clock) as store:
        run_id = store.create_run(config, opts.seed).id
        (stage.root / "saddler.toml").write_text(run_toml(source.name, opts, str(source.suite.path)), encoding="utf-8")
        started = clock()
        stage.write_skill(0, original, "SKILL.md.bak")
        results = evaluate(original)
        stage.write_evals(0, results)
        rate = wsp.mean_pass_rate(results)
        stage.write_benchmark(0, results, {})
        SkillRecorder(store, space, run_id, mutator_name).baseline(space.baseline_commit(), results, rate)
        failing = [k for k, ok in wsp.flat(results).items() if not ok]
        say(BASELINE_REPORT.format(rate=f"{rate:.4f}", failing=", ".join(failing) or "none"))
        log: dict[str, Any] = {
            "skill_name": source.name, "skill_path": str(source.skill_md), "started_at": started,
            "completed_at": None, "config": config["loop"], "baseline_pass_rate": round(rate, 4),
            "final_pass_rate": round(rate, 4), "total_iterations": 0, "kept_mutations": 0,
            "discarded_mutations": 0, "termination_reason": None, "iterations": [],
            "program_md_used": program.used,
        }  # fmt: skip
        stage.write_log(log)
    ws.finish_start()
    return log

"""Skill mode: the 000 seed's SKILL.md autoresearch loop (mutate -> validate -> evaluate -> keep/discard).

Phase 0 reads `{skill}/SKILL.md` and `{skill}/EVAL.md` (both required), `{skill-name}-workspace/evals/evals.json`,
the workspace's program.md and verification-results.json. Phase 1 measures the baseline. Phase 2 runs one
change per iteration: a hypothesis, the mutated SKILL.md (excluded mutations and structure failures are
dropped before evaluation and another hypothesis is tried, at most 2 retries), every eval with 2 runs (+1 on
disagreement, majority), then the seed's decision table (`decide`) and circuit breaker (`stop_reason`).
Phase 3 writes report.md and the logs; `apply_best` replaces the original SKILL.md only on "yes".
The original skill folder is never written before that: the workspace keeps its own git copy.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.skill_evals import make_agent
from benchmarks.skill_evals.agent import SkillAgent
from benchmarks.skill_evals.evals import EvalSuite, find_evals, load_evals
from benchmarks.skill_evals.grading import CaseResult, Judge, run_case
from evodag.store import EvoDAG
from saddler.errors import BackendError, ConfigError
from saddler.harness.gitcmd import git
from saddler.harness.space import HarnessSpace
from saddler.modes.skill import workspace as wsp
from saddler.modes.skill.default_strategy import OfflineMutator
from saddler.modes.skill.iteration import IterationMixin
from saddler.modes.skill.mutator import Mutator
from saddler.modes.skill.program import Program, SkillOptions, load_program
from saddler.modes.skill.record import SkillRecorder
from saddler.modes.skill.resume import resumable, resume_state
from saddler.modes.skill.rules import Best, eval_seed, resolve_skill, stop_message, stop_reason
from saddler.modes.skill.start import start_run

Say = Callable[[str], None]
Approve = Callable[[str], bool]  # diff of a NEUTRAL mutation -> kept?


def iso_now() -> str:
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


@dataclass
class SkillOutcome:
    """What a finished skill-mode run hands back (the apply step needs `skill_path` and `best_text`)."""

    workspace: Path
    skill_path: Path
    skill_name: str
    baseline_pass_rate: float
    final_pass_rate: float
    iterations: int
    kept: int
    discarded: int
    termination_reason: str
    original_text: str
    best_text: str
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        return {
            "workspace": str(self.workspace),
            "skill": self.skill_name,
            "baseline_pass_rate": self.baseline_pass_rate,
            "final_pass_rate": self.final_pass_rate,
            "iterations": self.iterations,
            "kept": self.kept,
            "discarded": self.discarded,
            "termination_reason": self.termination_reason,
            "changed": self.best_text != self.original_text,
            "warnings": self.warnings,
        }


def repo_root(skill_dir: Path) -> Path:
    """The git repository root holding the skill (the seed's {repo-root}); the skill's parent folder when the skill
    is not in a repository or is the repository itself (a workspace never goes inside the skill)."""
    proc = git(["rev-parse", "--show-toplevel"], skill_dir, check=False)
    root = Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else skill_dir.parent
    return skill_dir.parent if root == skill_dir else root


class SkillRun(IterationMixin):
    """One autoresearch run of a skill; `run()` goes through phases 0-3 and returns the outcome."""

    def __init__(
        self,
        skill_dir: Path,
        workspace: Path | None = None,
        options: SkillOptions | None = None,
        *,
        evals: Path | None = None,
        mutator: Mutator | None = None,
        agent: SkillAgent | None = None,
        judge: Judge | None = None,
        approve: Approve | None = None,
        say: Say | None = None,
        clock: Callable[[], str] = iso_now,
    ) -> None:
        self.opts = options or SkillOptions()
        self.opts.check()
        if self.opts.backend == "claude" and agent is None and shutil.which("claude") is None:
            raise BackendError("the claude CLI is not found on PATH; install it or use --backend offline")
        self.skill_md, self.name = resolve_skill(skill_dir)
        self.skill_dir = self.skill_md.parent
        self.ws = wsp.SkillWorkspace(workspace or repo_root(self.skill_dir) / f"{self.name}-autoresearch")
        if self.ws.root == self.skill_dir or self.skill_dir in self.ws.root.parents:
            raise ConfigError(f"the workspace {self.ws.root} must not be inside the skill folder {self.skill_dir}")
        evals_path = evals or find_evals(self.skill_dir, self.name)
        if evals_path is None:
            raise ConfigError(
                f"{self.name}-workspace/evals/evals.json not found near {self.skill_dir}: write it from "
                "EVAL.md's binary criteria (schema: benchmarks/skill_evals/README.md) or pass --evals"
            )
        self.suite: EvalSuite = load_evals(evals_path)
        default_agent, default_judge = make_agent(self.opts.backend, self.opts.model, self.opts.omit_rate)
        self.agent, self.judge = agent or default_agent, judge or default_judge
        self.mutator = mutator or self._default_mutator()
        self.approve, self.say, self.clock = approve, say or (lambda _t: None), clock

    def _default_mutator(self) -> Mutator:
        if self.opts.backend == "claude":
            from saddler.modes.skill.claude import ClaudeMutator

            return ClaudeMutator(model=self.opts.model)
        return OfflineMutator()

    def evaluate(self, text: str) -> list[CaseResult]:
        runs = self.opts.eval_runs
        return [
            run_case(
                self.agent,
                text,
                case,
                self.suite.base_dir,
                [eval_seed(self.opts.seed, case.name, r) for r in range(runs + 1)],
                self.judge,
                runs,
            )
            for case in self.suite.evals
        ]

    def run(self) -> SkillOutcome:
        """Phases 0-3; an unfinished run in the workspace is continued (see `resume`), a finished one archived."""
        warnings = list(self.suite.warnings)
        for w in warnings:
            self.say(f"warning: {w}")
        self.ws.finish_start()
        log = resumable(self.ws.root)
        resumed = log is not None
        if log is None:
            self.ws.prepare()
            program = load_program(self.ws.root)
            log = start_run(self.ws, self, program, self.evaluate, self.mutator.name, self.say, self.clock)
        program = load_program(self.ws.root)
        space = HarnessSpace(self.ws.root / "repo", self.ws.root / "worktrees")
        space.prune()
        original = (self.ws.root / "iteration-0" / "SKILL.md.bak").read_text(encoding="utf-8")
        with EvoDAG(self.ws.root / "evodag.sqlite", clock=self.clock) as store:
            run_id = store.get_run().id
            st = resume_state(self.ws, log, store, run_id, self.suite, self.evaluate)
            if resumed:
                store.update_run(run_id, status="running")
                store.log_event("skill.resumed", {"after_iteration": len(log["iterations"])}, run_id=run_id)
                self.say(f"resuming after iteration {len(log['iterations'])} (best {st.best.rate:.4f})")
            rec = SkillRecorder(store, space, run_id, self.mutator.name)
            return self._continue(
                store, space, rec, run_id, program, original, warnings, st.log, st.best, st.baseline_map, st.stalls,
                st.tried,
            )  # fmt: skip

    def _continue(
        self,
        store: EvoDAG,
        space: HarnessSpace,
        rec: SkillRecorder,
        run_id: int,
        program: Program,
        original: str,
        warnings: list[str],
        log: dict[str, Any],
        best: Best,
        baseline_map: dict[str, bool],
        stalls: int,
        tried: set[str],
    ) -> SkillOutcome:
        """Phase 2 from the state given, then phase 3."""
        entries: list[dict[str, Any]] = log["iterations"]
        n = len(entries)
        reason = stop_reason(n, self.opts, best.rate, stalls, program, tried)
        while reason is None:
            n += 1
            entry, best, stalls = self._iteration(n, store, space, rec, run_id, program, best, stalls, tried)
            if entry is None:
                reason = "strategies_exhausted"
                n -= 1
                break
            entries.append(entry)
            log.update(
                total_iterations=n,
                final_pass_rate=round(best.rate, 4),
                kept_mutations=sum(e["outcome"] == "kept" for e in entries),
                discarded_mutations=sum(e["outcome"] != "kept" for e in entries),
            )
            self.ws.write_log(log)
            reason = stop_reason(n, self.opts, best.rate, stalls, program, tried)
        log.update(completed_at=self.clock(), termination_reason=reason)
        self.ws.write_log(log)
        report = wsp.render_report(log, baseline_map, wsp.flat(best.results))
        (self.ws.root / "report.md").write_text(report, encoding="utf-8")
        self.ws.write_run_logs(log, report)
        store.update_run(
            run_id, status="finished", termination_reason=reason, finished_at=self.clock(), best_node_id=best.node_id
        )
        space.prune()
        space.close()
        left = [k for k, ok in wsp.flat(best.results).items() if not ok]
        self.say(stop_message(reason, self.opts, program, left))
        base, final = log["baseline_pass_rate"], log["final_pass_rate"]
        self.say(
            f"Autoresearch 완료:\n- Pass rate: {base} → {final} ({final - base:+.2f})\n"
            f"- {log['kept_mutations']}개 mutation 적용, {log['discarded_mutations']}개 폐기"
        )
        return SkillOutcome(
            self.ws.root,
            self.skill_md,
            self.name,
            log["baseline_pass_rate"],
            log["final_pass_rate"],
            n,
            log["kept_mutations"],
            log["discarded_mutations"],
            reason,
            original,
            best.text,
            warnings,
        )

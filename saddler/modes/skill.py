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
from saddler.harness import HarnessSpace
from saddler.modes import skill_workspace as wsp
from saddler.modes.skill_mutator import Mutation, MutationState, Mutator, OfflineMutator, focus_level
from saddler.modes.skill_program import Program, SkillOptions, load_program
from saddler.modes.skill_record import SkillRecorder
from saddler.modes.skill_rules import decide, eval_seed, resolve_skill, stop_reason
from saddler.runfolder import render_run_toml
from saddler.structure import check_skill_text

Say = Callable[[str], None]
Approve = Callable[[str], bool]  # diff of a NEUTRAL mutation -> kept?
MAX_RETRIES = 2
COMMIT_EPOCH = 946684800


def iso_now() -> str:
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


@dataclass
class Best:
    text: str
    results: list[CaseResult]
    rate: float
    node_id: int
    commit: str


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
        return {"workspace": str(self.workspace), "skill": self.skill_name,
                "baseline_pass_rate": self.baseline_pass_rate, "final_pass_rate": self.final_pass_rate,
                "iterations": self.iterations, "kept": self.kept, "discarded": self.discarded,
                "termination_reason": self.termination_reason, "changed": self.best_text != self.original_text,
                "warnings": self.warnings}


class SkillRun:
    """One autoresearch run of a skill; `run()` goes through phases 0-3 and returns the outcome."""

    def __init__(self, skill_dir: Path, workspace: Path | None = None, options: SkillOptions | None = None, *,
                 evals: Path | None = None, mutator: Mutator | None = None, agent: SkillAgent | None = None,
                 judge: Judge | None = None, approve: Approve | None = None, say: Say | None = None,
                 clock: Callable[[], str] = iso_now) -> None:
        self.opts = options or SkillOptions()
        self.opts.check()
        self.skill_md, self.name = resolve_skill(skill_dir)
        self.skill_dir = self.skill_md.parent
        self.ws = wsp.SkillWorkspace(workspace or self.skill_dir.parent / f"{self.name}-autoresearch")
        evals_path = evals or find_evals(self.skill_dir, self.name)
        if evals_path is None:
            raise ConfigError(f"{self.name}-workspace/evals/evals.json not found near {self.skill_dir}: write it from "
                              "EVAL.md's binary criteria (schema: benchmarks/skill_evals/README.md) or pass --evals")
        self.suite: EvalSuite = load_evals(evals_path)
        if self.opts.backend == "claude" and agent is None and shutil.which("claude") is None:
            raise BackendError("the claude CLI is not found on PATH; install it or use --backend offline")
        default_agent, default_judge = make_agent(self.opts.backend, self.opts.model, self.opts.omit_rate)
        self.agent, self.judge = agent or default_agent, judge or default_judge
        self.mutator = mutator or self._default_mutator()
        self.approve, self.say, self.clock = approve, say or (lambda _t: None), clock

    def _default_mutator(self) -> Mutator:
        if self.opts.backend == "claude":
            from saddler.modes.skill_claude import ClaudeMutator

            return ClaudeMutator(model=self.opts.model)
        return OfflineMutator()

    def evaluate(self, text: str) -> list[CaseResult]:
        runs = self.opts.eval_runs
        return [run_case(self.agent, text, case, self.suite.base_dir,
                         [eval_seed(self.opts.seed, case.name, r) for r in range(runs + 1)], self.judge, runs)
                for case in self.suite.evals]

    def run(self) -> SkillOutcome:
        self.ws.prepare()
        program = load_program(self.ws.root)
        warnings = list(self.suite.warnings)
        for w in warnings:
            self.say(f"warning: {w}")
        original = self.skill_md.read_text(encoding="utf-8")
        space = HarnessSpace.create(self.skill_dir, self.ws.root / "repo", self.ws.root / "worktrees",
                                    clock=lambda: COMMIT_EPOCH)
        with EvoDAG(self.ws.root / "evodag.sqlite", clock=self.clock) as store:
            opts = self.opts
            config: dict[str, Any] = {
                "name": self.name, "mode": "skill", "benchmark": "skill-evals", "skill_path": str(self.skill_md),
                "evals": str(self.suite.path), "sessions": {"backend": opts.backend},
                "loop": {"max_iterations": opts.max_iterations, "target_pass_rate": opts.target_pass_rate,
                         "stall_limit": opts.stall_limit, "eval_runs": opts.eval_runs},
            }  # fmt: skip
            run_id = store.create_run(config, self.opts.seed).id
            self._write_run_toml()
            rec = SkillRecorder(store, space, run_id, self.mutator.name)
            return self._loop(store, space, rec, run_id, program, original, warnings, config)

    def _write_run_toml(self) -> None:
        """W/saddler.toml, so `saddler report W` and `saddler status W` read the workspace like any run folder."""
        opts = self.opts
        (self.ws.root / "saddler.toml").write_text(render_run_toml({
            "name": self.name, "seed": opts.seed, "benchmark": "skill-evals", "harness": "repo",
            "benchmark_options": {"evals": str(self.suite.path), "agent": opts.backend, "holdout": False},
            "loop": {"max_iterations": opts.max_iterations, "stall_limit": opts.stall_limit},
            "sessions": {"backend": "offline"},
        }), encoding="utf-8")  # fmt: skip

    def _loop(self, store: EvoDAG, space: HarnessSpace, rec: SkillRecorder, run_id: int, program: Program,
              original: str, warnings: list[str], config: dict[str, Any]) -> SkillOutcome:
        started = self.clock()
        self.ws.write_skill(0, original, "SKILL.md.bak")
        results = self.evaluate(original)
        self.ws.write_evals(0, results)
        rate = wsp.mean_pass_rate(results)
        self.ws.write_benchmark(0, results, {})
        base = rec.baseline(space.baseline_commit(), results, rate)
        best = Best(original, results, rate, base.id, base.commit)
        baseline_map = wsp.flat(results)
        failing = [k for k, ok in baseline_map.items() if not ok]
        self.say(f"baseline: mean pass rate {rate:.4f}; failing assertions: {', '.join(failing) or 'none'}")
        log: dict[str, Any] = {
            "skill_name": self.name, "skill_path": str(self.skill_md), "started_at": started, "completed_at": None,
            "config": config["loop"], "baseline_pass_rate": round(rate, 4), "final_pass_rate": round(rate, 4),
            "total_iterations": 0, "kept_mutations": 0, "discarded_mutations": 0, "termination_reason": None,
            "iterations": [], "program_md_used": program.used,
        }  # fmt: skip
        entries: list[dict[str, Any]] = log["iterations"]
        self.ws.write_log(log)
        tried: set[str] = set()
        stalls, n = 0, 0
        reason = stop_reason(0, self.opts, best.rate, stalls, program, tried)
        while reason is None:
            n += 1
            entry, best, stalls = self._iteration(n, store, space, rec, run_id, program, best, stalls, tried)
            if entry is None:
                reason = "strategies_exhausted"
                n -= 1
                break
            entries.append(entry)
            log.update(total_iterations=n, final_pass_rate=round(best.rate, 4),
                       kept_mutations=sum(e["outcome"] == "kept" for e in entries),
                       discarded_mutations=sum(e["outcome"] != "kept" for e in entries))
            self.ws.write_log(log)
            reason = stop_reason(n, self.opts, best.rate, stalls, program, tried)
        log.update(completed_at=self.clock(), termination_reason=reason)
        self.ws.write_log(log)
        report = wsp.render_report(log, baseline_map, wsp.flat(best.results))
        (self.ws.root / "report.md").write_text(report, encoding="utf-8")
        self.ws.write_run_logs(log, report)
        store.update_run(run_id, status="finished", termination_reason=reason, finished_at=self.clock(),
                         best_node_id=best.node_id)
        space.prune()
        self.say(f"finished ({reason}): {log['baseline_pass_rate']} -> {log['final_pass_rate']}")
        return SkillOutcome(self.ws.root, self.skill_md, self.name, log["baseline_pass_rate"], log["final_pass_rate"],
                            n, log["kept_mutations"], log["discarded_mutations"], reason, original, best.text, warnings)

    def _commit(self, space: HarnessSpace, n: int, attempt: int, parent: str, text: str, message: str) -> str | None:
        space.clock = lambda: COMMIT_EPOCH + n * 60 + attempt
        wt = space.worktree(parent, f"it{n}-a{attempt}")
        try:
            (wt / "SKILL.md").write_text(text, encoding="utf-8")
            return space.commit_worktree(wt, message)
        finally:
            space.remove_worktree(wt)

    def _propose(self, n: int, space: HarnessSpace, rec: SkillRecorder, program: Program, best: Best,
                 tried: set[str]) -> tuple[Mutation | None, list[tuple[Mutation, str]], int | None]:
        """A hypothesis that passes exclusion and structure checks, after at most MAX_RETRIES rejected ones."""
        rejected: list[tuple[Mutation, str]] = []
        level = focus_level(best.results)
        for attempt in range(MAX_RETRIES + 1):
            state = MutationState(n, attempt, best.text, self.suite, best.results, program, set(tried))
            m = self.mutator.propose(state)
            if m is None:
                break
            tried.add(m.key)
            commit = self._commit(space, n, attempt, best.commit, m.text, f"autoresearch it{n}: {m.plan[:60]}")
            if commit is None:
                rejected.append((m, "empty change"))
                continue
            added = "\n".join(ln for ln in m.text.splitlines() if ln not in set(best.text.splitlines()))
            excl = program.excluded_by(f"{m.plan}\n{m.analysis}\n{added}")
            problems = [f"excluded mutation: {excl.pattern} ({excl.reason})"] if excl else \
                check_skill_text("SKILL.md", m.text, self.skill_md.read_text(encoding="utf-8"))
            node = rec.candidate(n, rec.store.get_node(best.node_id), commit, m, level, problems)
            if not problems:
                return m, rejected, node.id
            self.say(f"iter {n}: rejected before evaluation ({m.strategy_type}): {'; '.join(problems)}")
            rejected.append((m, "; ".join(problems)))
        return None, rejected, None

    def _iteration(self, n: int, store: EvoDAG, space: HarnessSpace, rec: SkillRecorder, run_id: int,
                   program: Program, best: Best, stalls: int,
                   tried: set[str]) -> tuple[dict[str, Any] | None, Best, int]:
        it = store.start_iteration(run_id, n, 0, [c.name for c in self.suite.evals], phase="steering",
                                   parent_id=best.node_id, stall_count=stalls)
        m, rejected, node_id = self._propose(n, space, rec, program, best, tried)
        stamp = self.clock()
        if m is None or node_id is None:
            if not rejected:
                store.update_iteration(it.id, decision="no_patch", step="done", finished_at=stamp)
                return None, best, stalls
            last, why = rejected[-1]
            self.ws.write_skill(n, last.text)
            self.ws.write_hypothesis(n, last, rejected[:-1])
            store.update_iteration(it.id, decision="invalid", step="done", stall_count=stalls + 1, finished_at=stamp)
            entry = {"iteration": n, "hypothesis": last.plan, "strategy_type": last.strategy_type,
                     "target": last.target, "pass_rate": round(best.rate, 4), "delta": "+0.00", "outcome": "discarded",
                     "decision": "DISCARD", "reason": f"rejected before evaluation: {why}", "regressions": [],
                     "timestamp": stamp}
            return entry, best, stalls + 1
        self.ws.write_skill(n, m.text)
        self.ws.write_hypothesis(n, m, rejected)
        results = self.evaluate(m.text)
        self.ws.write_evals(n, results)
        new_rate = wsp.mean_pass_rate(results)
        verdict = decide(new_rate, best.rate, wsp.flat(results), wsp.flat(best.results), m.source == "program")
        decision, reason = verdict.decision, verdict.reason
        if decision == "NEUTRAL":
            approved = self.opts.auto_approve_neutral or (self.approve is not None and self.approve(
                space.diff(best.commit, store.get_node(node_id).commit)))
            reason += "; approved" if approved else "; not approved"
            decision = "NEUTRAL" if approved else "DISCARD"
        delta = f"{new_rate - best.rate:+.2f}"
        self.ws.write_benchmark(n, results, {"decision": decision, "delta": delta, "regressions": verdict.regressions,
                                             "kept_assertions_gained": verdict.gained if decision != "DISCARD" else []})
        parent = store.get_node(best.node_id)
        node = rec.decided(store.get_node(node_id), decision, reason, best.rate, new_rate, best.results, results,
                           n, parent)
        kept = decision in ("KEEP", "NEUTRAL")
        store.update_iteration(it.id, candidate_id=node.id, decision={"KEEP": "accepted", "NEUTRAL": "neutral"}.get(
            decision, "rejected"), step="done", stall_count=0 if decision == "KEEP" else stalls + (not kept),
            finished_at=stamp)
        self.say(f"iter {n} [{m.strategy_type}] {decision}: {reason}")
        entry = {"iteration": n, "hypothesis": m.plan, "strategy_type": m.strategy_type, "target": m.target,
                 "pass_rate": round(new_rate, 4), "delta": delta, "outcome": "kept" if kept else "discarded",
                 "decision": decision, "reason": reason, "regressions": verdict.regressions,
                 "kept_assertions_gained": verdict.gained if kept else [], "timestamp": stamp}
        if decision == "KEEP":
            return entry, Best(m.text, results, new_rate, node.id, node.commit), 0
        if decision == "NEUTRAL":
            return entry, Best(m.text, results, new_rate, node.id, node.commit), stalls
        return entry, best, stalls + 1

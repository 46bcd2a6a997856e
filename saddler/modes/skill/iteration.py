"""One skill-mode iteration (the seed's 2-1 .. 2-6): hypothesis, mutation, validation with retries, evaluation,
decision, and its records (workspace files, EvoDAG rows, the autoresearch-log entry)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.skill_evals.evals import EvalSuite
from benchmarks.skill_evals.grading import CaseResult
from evodag.decisions import INVALID, KEPT_DECISIONS, NO_PATCH, SKILL_VERDICT_STATUS, stall_after
from evodag.store import EvoDAG
from saddler.harness.gitcmd import logical_commit_time
from saddler.harness.space import HarnessSpace
from saddler.harness.structure import check_skill_text
from saddler.modes.skill import workspace as wsp
from saddler.modes.skill.mutator import Mutation, MutationState, Mutator, exclusion_text, focus_level
from saddler.modes.skill.program import Program, SkillOptions
from saddler.modes.skill.record import SkillRecorder
from saddler.modes.skill.rules import Best
from saddler.policies.seed_acceptance import AssertionVeto

MAX_RETRIES = 2


class IterationMixin:
    """Needs the attributes below (set by `SkillRun`)."""

    opts: SkillOptions
    ws: wsp.SkillWorkspace
    suite: EvalSuite
    mutator: Mutator
    skill_md: Path
    approve: Callable[[str], bool] | None
    say: Callable[[str], None]
    clock: Callable[[], str]

    def evaluate(self, text: str) -> list[CaseResult]:
        raise NotImplementedError

    def _commit(self, space: HarnessSpace, n: int, attempt: int, parent: str, text: str, message: str) -> str | None:
        space.clock = lambda: logical_commit_time(n, attempt)
        wt = space.worktree(parent, f"it{n}-a{attempt}")
        try:
            (wt / "SKILL.md").write_text(text, encoding="utf-8")
            return space.commit_worktree(wt, message)
        finally:
            space.remove_worktree(wt)

    def _propose(
        self, n: int, space: HarnessSpace, rec: SkillRecorder, program: Program, best: Best, tried: set[str]
    ) -> tuple[Mutation | None, list[tuple[Mutation, str]], int | None]:
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
                rec.session(n, best.node_id, m, "failed:empty change")
                self.say(f"iter {n}: rejected before evaluation ({m.strategy_type}): empty change")
                rejected.append((m, "empty change"))
                continue
            excl = program.excluded_by(exclusion_text(m, best.text))
            problems = (
                [f"excluded mutation: {excl.pattern} ({excl.reason})"]
                if excl
                else check_skill_text("SKILL.md", m.text, self.skill_md.read_text(encoding="utf-8"))
            )
            node = rec.candidate(n, rec.store.get_node(best.node_id), commit, m, level, problems)
            if not problems:
                return m, rejected, node.id
            self.say(f"iter {n}: rejected before evaluation ({m.strategy_type}): {'; '.join(problems)}")
            rejected.append((m, "; ".join(problems)))
        return None, rejected, None

    def _iteration(
        self,
        n: int,
        store: EvoDAG,
        space: HarnessSpace,
        rec: SkillRecorder,
        run_id: int,
        program: Program,
        best: Best,
        stalls: int,
        tried: set[str],
    ) -> tuple[dict[str, Any] | None, Best, int]:
        it = store.start_iteration(
            run_id,
            n,
            0,
            [c.name for c in self.suite.evals],
            phase="steering",
            parent_id=best.node_id,
            stall_count=stalls,
        )
        m, rejected, node_id = self._propose(n, space, rec, program, best, tried)
        stamp = self.clock()
        if m is None or node_id is None:
            if not rejected:
                store.update_iteration(it.id, decision=NO_PATCH, step="done", finished_at=stamp)
                return None, best, stalls
            last, why = rejected[-1]
            self.ws.write_skill(n, last.text)
            self.ws.write_hypothesis(n, last, rejected[:-1])
            stalls = stall_after(stalls, INVALID, neutral_holds=True)
            store.update_iteration(it.id, decision=INVALID, step="done", stall_count=stalls, finished_at=stamp)
            entry = {
                "iteration": n,
                "hypothesis": last.plan,
                "strategy_type": last.strategy_type,
                "target": last.target,
                "pass_rate": round(best.rate, 4),
                "delta": "+0.00",
                "outcome": "discarded",
                "decision": "DISCARD",
                "reason": f"rejected before evaluation: {why}",
                "regressions": [],
                "timestamp": stamp,
                "tried_keys": [r.key for r, _ in rejected],
            }
            self.say(f"iter {n} [{last.strategy_type}] DISCARD: rejected before evaluation")
            return entry, best, stalls
        self.ws.write_skill(n, m.text)
        self.ws.write_hypothesis(n, m, rejected)
        results = self.evaluate(m.text)
        self.ws.write_evals(n, results)
        new_rate = wsp.mean_pass_rate(results)
        verdict = AssertionVeto().decide(
            new_rate, best.rate, wsp.flat(results), wsp.flat(best.results), m.source == "program"
        )
        decision, reason = verdict.decision, verdict.reason
        if decision == "NEUTRAL":
            approved = self.opts.auto_approve_neutral or (
                self.approve is not None and self.approve(space.diff(best.commit, store.get_node(node_id).commit))
            )
            reason += "; approved" if approved else "; not approved"
            decision = "NEUTRAL" if approved else "DISCARD"
        delta = f"{new_rate - best.rate:+.2f}"
        self.ws.write_benchmark(
            n,
            results,
            {
                "decision": decision,
                "delta": delta,
                "regressions": verdict.regressions,
                "kept_assertions_gained": verdict.gained if decision != "DISCARD" else [],
            },
        )
        parent = store.get_node(best.node_id)
        node = rec.decided(
            store.get_node(node_id), decision, reason, best.rate, new_rate, best.results, results, n, parent
        )
        status = SKILL_VERDICT_STATUS[decision]
        kept = status in KEPT_DECISIONS
        stalls = stall_after(stalls, status, neutral_holds=True)
        store.update_iteration(
            it.id, candidate_id=node.id, decision=status, step="done", stall_count=stalls, finished_at=stamp
        )
        self.say(f"iter {n} [{m.strategy_type}] {decision}: {reason}")
        entry = {
            "iteration": n,
            "hypothesis": m.plan,
            "strategy_type": m.strategy_type,
            "target": m.target,
            "pass_rate": round(new_rate, 4),
            "delta": delta,
            "outcome": "kept" if kept else "discarded",
            "decision": decision,
            "reason": reason,
            "regressions": verdict.regressions,
            "kept_assertions_gained": verdict.gained if kept else [],
            "timestamp": stamp,
            "tried_keys": [*(r.key for r, _ in rejected), m.key],
        }
        if kept:
            return entry, Best(m.text, results, new_rate, node.id, node.commit), stalls
        return entry, best, stalls

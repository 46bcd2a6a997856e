"""The optimizer loop: DESIGN.md "One iteration", steps 1-8, then the end of the run.

Every step is idempotent — rollouts are cached by content, nodes deduplicated by commit, sessions
skipped when their result is already stored — so a killed run resumes by redoing its unfinished
iteration, repeating no finished rollout and losing no node.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evodag.models import Iteration, Node, RolloutRow
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.policies.stopping import LoopState, trailing_stalls
from saddler.ports import Progress
from saddler.reporting.progress import make_progress
from saddler.run import evolution
from saddler.run.context import RunContext, open_context
from saddler.run.faults import fault_point
from saddler.run.finish import RunOutcome, finish_run
from saddler.run.folder import RunPaths, run_lock
from saddler.run.outcomes import task_outcomes

Say = Callable[[str], None]
KEPT_DECISIONS = ("accepted", "neutral")
COMMIT_EPOCH = 946684800  # commit dates are logical: 2000-01-01 + one minute per iteration


class Optimizer:
    """One run folder's optimization; `run()` starts it or resumes it where it stopped."""

    def __init__(
        self, run_dir: Path, *, quiet: bool = False, say: Say | None = None, progress: Progress | None = None
    ) -> None:
        self.paths = RunPaths(Path(run_dir).resolve())
        self.cfg = load_run_config(self.paths.root)
        self.say: Say = say or (lambda _text: None)
        self.progress = progress or make_progress(quiet)

    def run(self) -> RunOutcome:
        self.paths.traces.mkdir(parents=True, exist_ok=True)
        self.paths.sessions.mkdir(parents=True, exist_ok=True)
        with run_lock(self.paths.root), EvoDAG(self.paths.db) as store:
            ctx = open_context(self.paths, self.cfg, store, self.progress)
            try:
                return self._run(ctx)
            finally:
                ctx.executor.close()
                ctx.space.prune()

    def _run(self, ctx: RunContext) -> RunOutcome:
        baseline = self._baseline(ctx)
        ctx.store.update_run(ctx.run_id, status="running", finished_at=None, termination_reason=None)
        while True:
            iterations = ctx.store.iterations(run_id=ctx.run_id)
            done = [it for it in iterations if it.finished_at is not None]
            stalls = trailing_stalls([it.decision for it in done])
            cost = ctx.store.rollout_cost(ctx.run_id) + ctx.store.session_cost(ctx.run_id)
            state = LoopState(len(done), ctx.store.count_rollouts(ctx.run_id), cost, ctx.best().dev_mean, stalls)
            reason = ctx.stop.check(state)
            if reason:
                break
            pending = iterations[-1] if iterations and iterations[-1].finished_at is None else None
            self._iteration(ctx, len(done) + 1, pending, self._current(ctx, done, baseline), stalls)
        if reason == "paused":
            ctx.store.update_run(ctx.run_id, status="paused", termination_reason="paused")
            self.say("paused: `saddler resume DIR` then `saddler run DIR` continues from here")
            best = ctx.best()
            return RunOutcome("paused", best.id, None, None, best.dev_mean, ctx.store.count_rollouts(ctx.run_id), None)
        return finish_run(ctx, baseline, reason, self.say)

    @staticmethod
    def _baseline(ctx: RunContext) -> Node:
        run = ctx.store.get_run(ctx.run_id)
        if run.baseline_node_id is not None:
            node = ctx.store.get_node(run.baseline_node_id)
        else:
            commit = ctx.space.baseline_commit()
            node = ctx.store.node_by_commit(commit, run_id=ctx.run_id) or ctx.store.add_node(
                ctx.run_id, commit, None, 0, "baseline", "baseline", "baseline", status="baseline"
            )
            ctx.store.update_run(ctx.run_id, baseline_node_id=node.id, best_node_id=node.id)
        return ctx.eval_dev(node) if ctx.cfg.policies.dev_eval != "never" else node

    @staticmethod
    def _current(ctx: RunContext, done: list[Iteration], baseline: Node) -> Node:
        """The latest kept node: the last iteration's candidate if kept, else its parent."""
        if not done:
            return baseline
        last = done[-1]
        if last.decision in KEPT_DECISIONS and last.candidate_id is not None:
            return ctx.store.get_node(last.candidate_id)
        return ctx.store.get_node(last.parent_id) if last.parent_id is not None else baseline

    # one iteration --------------------------------------------------------------------------------
    def _iteration(self, ctx: RunContext, number: int, pending: Iteration | None, current: Node, stalls: int) -> None:
        store, cfg = ctx.store, ctx.cfg
        epoch, batch = ctx.sampler.batch(number - 1)
        phase = ctx.phases.phase(ctx.sampler.tasks_seen(number - 1))
        exploration = bool(cfg.loop.plateau_threshold) and stalls >= cfg.loop.plateau_threshold
        it = pending or store.start_iteration(
            ctx.run_id, number, epoch, batch, phase=phase, exploration=exploration, stall_count=stalls
        )
        ctx.space.clock = lambda: COMMIT_EPOCH + number * 60  # same seed + config => same commits

        # 1. evolution picks the parent
        parent = self._evolve(ctx, it, current) if it.parent_id is None else store.get_node(it.parent_id)
        it = store.update_iteration(it.id, parent_id=parent.id, step="evolved")
        # 2-3. the mini-batch, and the parent on it (cached rollouts are reused)
        before = ctx.eval_batch(parent, batch)
        # 4-5. diagnosis-patch in an isolated worktree, then validation (retried with another hypothesis)
        cand = store.get_node(it.candidate_id) if it.candidate_id is not None else self._patch(ctx, it, parent, before)
        if cand is None or cand.status == "invalid":
            decision = "no_patch" if cand is None else "invalid"
            self._finish_iteration(ctx, it, decision, cand, stalls)
            return
        it = store.update_iteration(it.id, candidate_id=cand.id, step="validated")
        # 6. the candidate on the same batch with the same seeds; only a strict improvement goes to dev
        after = ctx.eval_batch(cand, batch)
        verdict = ctx.acceptance.decide(task_outcomes(before), task_outcomes(after))
        cand = store.update_node(cand.id, batch_before=verdict.before, batch_after=verdict.after)
        dev_policy = cfg.policies.dev_eval
        if dev_policy == "always" or (dev_policy == "on_accept" and verdict.verdict in KEPT_DECISIONS):
            cand = ctx.eval_dev(cand)
        status = "accepted" if verdict.verdict == "accepted" else verdict.verdict
        cand = store.update_node(cand.id, status=status, status_reason=verdict.reason)
        # 7. reflection, accepted or not (dev only as aggregates)
        self._reflect(ctx, it, parent, cand, status, before, after)
        best = ctx.best()
        self.say(
            f"iter {number:>3} [{phase}] n{parent.id} -> n{cand.id} {cand.origin}: {verdict.reason}"
            + (f"; dev {cand.dev_mean:.3f}" if cand.dev_mean is not None else "")
            + f" | best n{best.id} dev {best.dev_mean if best.dev_mean is None else round(best.dev_mean, 3)}"
        )
        # 8. all in the EvoDAG before the next step
        self._finish_iteration(ctx, it, status, cand, stalls)

    def _evolve(self, ctx: RunContext, it: Iteration, current: Node) -> Node:
        if it.number == 1 or ctx.cfg.policies.evolution == "continue":
            return current
        best = ctx.best()
        request = evolution.build_request(
            ctx.store, ctx.run_id, it.number, current, best, str(ctx.paths.root), str(ctx.paths.db)
        )
        result = ctx.backend.evolve(request)
        ctx.record_session("evolution", result.stats, it.number, current.id)
        if result.parent_node_id not in {n.node_id for n in request.nodes}:
            result = result.model_copy(update={"action": "continue", "parent_node_id": current.id})
        base = ctx.store.get_node(result.parent_node_id)
        made = evolution.apply_action(ctx.store, ctx.space, ctx.run_id, it.number, it.phase, result)
        ctx.store.log_event(
            "evolution.action",
            {
                "iteration": it.number,
                "action": result.action,
                "key": made.key if made else f"{result.action}@{base.id}",
                "rationale": result.rationale,
                "error": made.error if made else "",
            },
            run_id=ctx.run_id,
        )
        self.say(f"iter {it.number:>3} evolution: {result.rationale}")
        if made is None or made.node is None:
            return base
        node = made.node
        if node.status == "pending":
            if ctx.cfg.policies.dev_eval != "never":
                node = ctx.eval_dev(node)
            better = node.dev_mean is None or base.dev_mean is None or node.dev_mean >= base.dev_mean
            status = "accepted" if better else "rejected"
            node = ctx.store.update_node(
                node.id, status=status, status_reason=f"{result.action}: dev {node.dev_mean} vs base {base.dev_mean}"
            )
        return node if node.status in KEPT_DECISIONS else base

    def _patch(self, ctx: RunContext, it: Iteration, parent: Node, before: list[RolloutRow]) -> Node | None:
        """Diagnosis-patch then validation; each failed validation is an invalid node and a retry."""
        store, space = ctx.store, ctx.space
        excluded = sorted(
            {n.origin for n in store.nodes(run_id=ctx.run_id) if n.parent_id == parent.id and n.iteration < it.number}
        )
        logged = any(
            e.kind == "diagnosis.evidence" and e.payload.get("iteration") == it.number
            for e in store.events(run_id=ctx.run_id)
        )
        if not logged:  # once per iteration, also when a resumed iteration diagnoses again
            store.log_event(
                "diagnosis.evidence",
                {"iteration": it.number, "trace_paths": [r.trace_path for r in before if r.trace_path]},
                run_id=ctx.run_id,
            )
        node: Node | None = None
        for attempt in range(ctx.cfg.policies.max_patch_attempts):
            worktree = space.worktree(parent.commit, f"it{it.number}-a{attempt}")
            try:
                result = ctx.backend.diagnose_patch(
                    ctx.diagnosis_request(it, parent, worktree, before, attempt, excluded)
                )
                ctx.record_session("diagnosis_patch", result.stats, it.number, parent.id)
                fault_point("session")
                if result.status != "patched" or result.hypothesis is None:
                    store.log_event(
                        "diagnosis.no_patch", {"iteration": it.number, "reason": result.reason}, run_id=ctx.run_id
                    )
                    self.say(f"iter {it.number:>3} [{it.phase}] no patch: {result.reason}")
                    return node
                hyp = result.hypothesis
                commit = space.commit_worktree(worktree, f"saddler it{it.number}: {hyp.origin}: {hyp.plan[:60]}")
                fault_point("commit")
                problems = [] if commit else ["empty change: the session edited nothing"]
                if commit:
                    problems = self._validate(ctx, it, parent.commit, commit, worktree, hyp.origin, excluded)
            finally:
                space.remove_worktree(worktree)
            if commit is None:
                store.log_event("diagnosis.empty", {"iteration": it.number, "origin": hyp.origin}, run_id=ctx.run_id)
                excluded.append(hyp.origin)
                continue
            node = self._candidate_node(ctx, it, parent, commit, hyp.model_dump(), problems)
            if not problems:
                return node
            self.say(f"iter {it.number:>3} invalid n{node.id} {hyp.origin}: {'; '.join(problems)}")
            excluded.append(hyp.origin)
        return node

    @staticmethod
    def _validate(
        ctx: RunContext, it: Iteration, parent: str, commit: str, worktree: Path, origin: str, excluded: list[str]
    ) -> list[str]:
        files = ctx.space.changed_files(parent, commit)
        problems = ctx.space.check_change(parent, commit)
        kind = ctx.space.patch_kind(files)
        allowed = ctx.phases.allowed_kinds(it.phase)
        if (
            kind == "unclassified"
            or (kind == "mixed" and not {"capability", "steering"} <= set(allowed))
            or (kind in ("capability", "steering") and kind not in allowed)
        ):
            problems.append(f"{kind} change not allowed in the {it.phase} phase (allowed: {', '.join(allowed)})")
        if origin in excluded:
            problems.append(f"excluded mutation: {origin}")
        return problems + ctx.space.validate_commit(worktree, parent, commit)

    @staticmethod
    def _candidate_node(
        ctx: RunContext, it: Iteration, parent: Node, commit: str, hypothesis: dict[str, object], problems: list[str]
    ) -> Node:
        store, space = ctx.store, ctx.space
        existing = store.node_by_commit(commit, run_id=ctx.run_id)
        if existing is not None and existing.parent_id == parent.id:
            return existing
        files = space.changed_files(parent.commit, commit)
        added, removed = space.numstat(space.baseline_commit(), commit)
        with store.transaction():
            node = store.add_node(
                ctx.run_id,
                commit,
                parent.id,
                it.number,
                it.phase,
                space.patch_kind(files),
                str(hypothesis.get("origin", "patch")),
                status="invalid" if problems else "pending",
                status_reason="; ".join(problems),
                hypothesis=hypothesis,
                lines_changed=added + removed,
            )
            fault_point("write")
            a, r = space.numstat(parent.commit, commit)
            store.add_edge(ctx.run_id, parent.id, node.id, "patch", space.diff(parent.commit, commit), files, a, r)
        return node

    @staticmethod
    def _reflect(
        ctx: RunContext,
        it: Iteration,
        parent: Node,
        cand: Node,
        decision: str,
        before: list[RolloutRow],
        after: list[RolloutRow],
    ) -> None:
        store = ctx.store
        edge = store.edge_between(parent.id, cand.id)
        if store.lessons(edge_id=edge.id):
            return  # already reflected before a crash
        result = ctx.backend.reflect(ctx.reflection_request(it, parent, cand, decision, before, after))
        ctx.record_session("reflection", result.stats, it.number, cand.id)
        groups: dict[str, list[str]] = {"fixed": [], "regressed": [], "still_failing": [], "still_passing": []}
        with store.transaction():
            for lesson in result.lessons:
                store.add_lesson(
                    ctx.run_id,
                    lesson.category,
                    lesson.attribution,
                    lesson.text,
                    node_id=cand.id,
                    edge_id=edge.id,
                    iteration=it.number,
                    task_id=lesson.task_id,
                )
                fault_point("reflect")
                if lesson.task_id and lesson.category in groups:
                    groups[lesson.category].append(lesson.task_id)
            store.set_edge_transitions(edge.id, **groups)

    @staticmethod
    def _finish_iteration(ctx: RunContext, it: Iteration, decision: str, cand: Node | None, stalls: int) -> None:
        kept = decision in KEPT_DECISIONS
        ctx.best()
        ctx.store.update_iteration(
            it.id,
            decision=decision,
            candidate_id=cand.id if cand else None,
            stall_count=0 if kept else stalls + 1,
            step="done",
            finished_at=ctx.store.clock(),
        )

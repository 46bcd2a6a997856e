"""The optimizer loop: one iteration's steps 1-8 (docs/architecture.md, "One iteration"), then the end of the run.

Every step is idempotent — rollouts are cached by content, nodes deduplicated by commit, sessions keyed by
(iteration, role, attempt) and replayed from the store — so a killed run resumes by redoing its unfinished
iteration, repeating no finished rollout, paying for no session twice and losing no node.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from evodag.decisions import KEPT_DECISIONS, NEUTRAL, NO_TRAINING_FAILURES, stall_after, trailing_stalls
from evodag.models import Iteration, Node
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.harness.gitcmd import logical_commit_time
from saddler.policies.stopping import LoopState
from saddler.ports import Progress
from saddler.reporting.progress import make_progress
from saddler.run import audit, closecall, diagnosis, inputs, phase_moves, reflection, stepping_stone, unseen_tie
from saddler.run.context import RunContext, open_context
from saddler.run.evolution_step import evolve
from saddler.run.finish import RunOutcome, finish_run, finished_outcome
from saddler.run.folder import RunPaths, run_lock
from saddler.run.folder_check import require_ok
from saddler.run.minimize import minimize
from saddler.run.outcomes import nothing_to_fix
from saddler.run.recovery import recover_after_crash
from saddler.run.sampling import sampler_state, scheduled_phase
from saddler.scoring import figure

Say = Callable[[str], None]


class Optimizer:
    """One run folder's optimization; `run()` starts it or resumes it where it stopped.

    A run whose results-affecting inputs changed since it started is refused (`ChangedInputsError`, exit 2)
    unless `allow_changed`; then the change is recorded as a `run.inputs_changed` event.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        quiet: bool = False,
        say: Say | None = None,
        progress: Progress | None = None,
        allow_changed: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.paths = RunPaths(Path(run_dir).resolve())
        self.cfg = load_run_config(self.paths.root)
        self.say: Say = say or (lambda _text: None)
        self.progress = progress or make_progress(quiet)
        self.allow_changed = allow_changed
        self.sleep, self.wall_clock = sleep, wall_clock

    def run(self) -> RunOutcome:
        require_ok(self.paths.root)  # a config that cannot work is refused before anything is written
        with run_lock(self.paths.root) as lock, EvoDAG(self.paths.db) as store:
            recover_after_crash(self.paths, self.cfg.harness, lock.acquired_at, store, self.say)
            self.paths.traces.mkdir(parents=True, exist_ok=True)
            self.paths.sessions.mkdir(parents=True, exist_ok=True)
            ctx = open_context(
                self.paths, self.cfg, store, self.progress, say=self.say, sleep=self.sleep, wall_clock=self.wall_clock
            )
            try:
                inputs.check_inputs(ctx, self.allow_changed, self.say)
                return self._run(ctx)
            finally:
                ctx.executor.close()
                ctx.space.prune()
                ctx.space.close()

    def _run(self, ctx: RunContext) -> RunOutcome:
        if ctx.store.get_run(ctx.run_id).status == "finished":
            reason = ctx.stop.check(self._state(ctx)[2])
            if reason:  # nothing asks for more: report the stored end, write nothing
                return finished_outcome(ctx)
        baseline = self._baseline_node(ctx)
        if ctx.stop.sentinel() == "paused":  # before anything runs, the baseline included
            return self._paused(ctx)
        baseline = ctx.eval_dev(baseline) if ctx.cfg.policies.dev_eval != "never" else baseline
        ctx.update_best()
        ctx.store.update_run(ctx.run_id, status="running", finished_at=None, termination_reason=None)
        while True:
            iterations, done, state = self._state(ctx)
            reason = ctx.stop.check(state)
            if reason:
                break
            pending = iterations[-1] if iterations and iterations[-1].finished_at is None else None
            current = self._current(ctx, done, baseline)
            self._iteration(ctx, iterations, len(done) + 1, pending, current, state.stall_count)
        if reason == "paused":
            return self._paused(ctx)
        if ctx.cfg.minimize.enabled:  # the best harness cut to the changes that carry their weight on dev
            minimize(ctx, self.say)
        return finish_run(ctx, baseline, reason, self.say)

    @staticmethod
    def _state(ctx: RunContext) -> tuple[list[Iteration], list[Iteration], LoopState]:
        """The iterations, the finished ones, and the numbers the stop conditions look at."""
        iterations = ctx.iterations.read()
        done = [it for it in iterations if it.finished_at is not None]
        stalls = trailing_stalls([it.decision for it in done])
        cost = ctx.store.rollout_cost(ctx.run_id) + ctx.store.session_cost(ctx.run_id)
        dev = ctx.best().dev_mean
        return iterations, done, LoopState(len(done), ctx.store.count_rollouts(ctx.run_id), cost, dev, stalls)

    def _paused(self, ctx: RunContext) -> RunOutcome:
        run = ctx.store.get_run(ctx.run_id)
        if (run.status, run.termination_reason) != ("paused", "paused"):
            ctx.store.update_run(ctx.run_id, status="paused", termination_reason="paused")
        self.say("paused: `saddler resume DIR` then `saddler run DIR` continues from here")
        best = ctx.best()
        return RunOutcome("paused", best.id, None, None, best.dev_mean, ctx.store.count_rollouts(ctx.run_id), None)

    @staticmethod
    def _baseline_node(ctx: RunContext) -> Node:
        """The baseline node, made (without running anything) on the first start."""
        run = ctx.store.get_run(ctx.run_id)
        if run.baseline_node_id is not None:
            return ctx.store.get_node(run.baseline_node_id)
        commit = ctx.space.baseline_commit()
        node = ctx.store.node_by_commit(commit, run_id=ctx.run_id) or ctx.store.add_node(
            ctx.run_id, commit, None, 0, "baseline", "baseline", "baseline", status="baseline"
        )
        ctx.store.update_run(ctx.run_id, baseline_node_id=node.id, best_node_id=node.id)  # the first best
        return node

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
    def _iteration(
        self,
        ctx: RunContext,
        iterations: list[Iteration],
        number: int,
        pending: Iteration | None,
        current: Node,
        stalls: int,
    ) -> None:
        """Iteration `number`; `iterations` are the run's iterations as `_state` just read them."""
        store, cfg = ctx.store, ctx.cfg
        if pending is None:  # a resumed iteration keeps the batch and phase it stored
            state = sampler_state(store, iterations, number, current, ctx.sampler.adaptive)
            epoch, batch = ctx.sampler.batch(number - 1, state)
            phase, why = scheduled_phase(ctx.phases, iterations, number)
            was = scheduled_phase(ctx.phases, iterations, number - 1)[0] if number > 1 else phase
            exploration = bool(cfg.loop.plateau_threshold) and stalls >= cfg.loop.plateau_threshold
            with store.transaction():  # the schedule's own move (the end of Capability) is an event too
                pending = store.start_iteration(
                    ctx.run_id, number, epoch, batch, phase=phase, exploration=exploration, stall_count=stalls
                )
                if was != phase:
                    phase_moves.log_move(ctx, number, was, phase, why, scheduled=True)
        it, batch = pending, pending.batch
        ctx.space.clock = lambda: logical_commit_time(number)

        # 1. evolution picks the parent
        if it.parent_id is None:
            parent = evolve(ctx, it, current, self.say)
            it = store.update_iteration(it.id, parent_id=parent.id, step="evolved")
        else:
            parent = store.get_node(it.parent_id)
        # 2-3. the mini-batch, and the parent on it (cached rollouts are reused)
        before = ctx.eval_batch(parent, batch)
        if it.candidate_id is None and nothing_to_fix(before, ctx.score_kind):
            # nothing to diagnose (AutoSaddler's no_training_failures): no session is paid for
            self.say(f"iter {number:>3} [{it.phase}] n{parent.id} passes all {len(batch)} task(s): no diagnosis")
            self._finish_iteration(ctx, it, NO_TRAINING_FAILURES, None, stalls)
            return
        if it.candidate_id is None:  # the phase follows what the failures point at (policies.phase_moves)
            it = phase_moves.follow_evidence(ctx, it, before)
        # 4-5. diagnosis-patch in an isolated worktree, then validation (retried with another hypothesis)
        cand = (
            store.get_node(it.candidate_id)
            if it.candidate_id is not None
            else diagnosis.patch(ctx, it, parent, before, self.say)
        )
        if cand is None or cand.status == "invalid":
            decision = "no_patch" if cand is None else "invalid"
            self._finish_iteration(ctx, it, decision, cand, stalls)
            return
        if it.candidate_id is None:
            it = store.update_iteration(it.id, candidate_id=cand.id, step="validated")
        # 6. the candidate on the same batch with the same seeds; a close call gathers evidence until it is clear;
        # only a kept candidate, or a tie train could not show, goes to dev
        after = ctx.eval_batch(cand, batch)
        suspect = audit.trace_suspect(ctx, after)  # the cheat audit of what the task agent read
        if suspect:
            audit.record(ctx, it, cand, "traces", suspect)
        if suspect and audit.refuses(ctx):
            cand = store.update_node(cand.id, status="invalid", status_reason=suspect)
            self._finish_iteration(ctx, it, "invalid", cand, stalls)
            return
        verdict, before, after = closecall.decide(ctx, it, parent, cand, before, after)
        verdict, movement = stepping_stone.keep_moved_tie(
            cfg.policies.keep_stepping_stones, parent, cand, verdict, before, after
        )
        if movement is not None:  # what became of the targeted failures, and whether the tie is kept for it
            moved = {"moved": movement.moved, "stuck": movement.stuck, "stone": verdict.verdict == NEUTRAL}
            ctx.note_evidence(it, "targeted_failures", moved)
        cand = store.update_node(cand.id, batch_before=verdict.before, batch_after=verdict.after)
        dev_policy = cfg.policies.dev_eval
        unseen = unseen_tie.goes_to_dev(cfg.policies, cand, verdict, before)  # a tie train could not show
        if dev_policy == "always" or (dev_policy == "on_accept" and (verdict.verdict in KEPT_DECISIONS or unseen)):
            cand = ctx.eval_dev(cand)
        if unseen:
            verdict = unseen_tie.decide_on_dev(ctx, it, parent, cand, verdict)
        verdict = ctx.guard_on_dev(it, parent, cand, verdict)  # accepted on train, clearly worse on dev: not kept
        status = verdict.verdict
        cand = store.update_node(cand.id, status=status, status_reason=audit.marked(ctx, cand, verdict.reason))
        best = ctx.update_best()
        # 7. the edge's transitions from the scores, then reflection, accepted or not (dev only as aggregates)
        reflection.reflect(ctx, it, parent, cand, status, before, after)
        self.say(
            f"iter {number:>3} [{it.phase}] n{parent.id} -> n{cand.id} {cand.origin}: {verdict.reason}"
            + (f"; dev {figure(cand.dev_mean)}" if cand.dev_mean is not None else "")
            + f" | best n{best.id} dev {figure(best.dev_mean)}"
        )
        # 8. all in the EvoDAG before the next step
        self._finish_iteration(ctx, it, status, cand, stalls)

    @staticmethod
    def _finish_iteration(ctx: RunContext, it: Iteration, decision: str, cand: Node | None, stalls: int) -> None:
        ctx.store.update_iteration(
            it.id,
            decision=decision,
            candidate_id=cand.id if cand else None,
            stall_count=stall_after(stalls, decision),
            step="done",
            finished_at=ctx.store.clock(),
            last_rollout=ctx.store.last_rollout_id(),
        )

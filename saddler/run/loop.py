"""The optimizer loop: one iteration's steps 1-8 (docs/architecture.md, "One iteration"), several iterations in
flight at once, then the end of the run.

The run is a pipeline: `loop.parallel_iterations` iterations are in flight, each a task of the run's scheduler
(`saddler.schedule`) that waits for its rollouts and sessions while the others go on; every rollout goes to one
pool of sandboxes. A new iteration starts whenever one ends and nothing says stop; its evolution sees every
finished one (`saddler.run.flights`). With one iteration in flight this is the serial loop, step for step.

Every step is idempotent — rollouts are cached by content, nodes deduplicated by commit, sessions keyed by
(iteration, role, attempt) and replayed from the store — so a killed run resumes by redoing its unfinished
iterations, repeating no finished rollout, paying for no session twice and losing no node.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from evodag.decisions import KEPT_DECISIONS, NEUTRAL, NO_TRAINING_FAILURES
from evodag.models import Iteration, Node
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.policies.stopping import LoopState
from saddler.ports import Progress
from saddler.reporting.progress import make_progress
from saddler.run import (
    audit,
    carry,
    closecall,
    diagnosis,
    flights,
    inputs,
    phase_moves,
    reflection,
    stepping_stone,
    unseen_tie,
)
from saddler.run.context import RunContext, open_context
from saddler.run.evolution_step import evolve
from saddler.run.finish import RunOutcome, evaluate_test, finish_run, finished_outcome
from saddler.run.flights import DiagnosisOrder
from saddler.run.folder import RunPaths, run_lock
from saddler.run.folder_check import require_ok
from saddler.run.minimize import minimize
from saddler.run.outcomes import nothing_to_fix
from saddler.run.pipeline import ITERATION, SEARCH_EVENT, ScheduleState, attach, default_schedule, store_clock
from saddler.run.recovery import recover_after_crash
from saddler.run.streaming import PRIORITY
from saddler.schedule import Pipeline, Schedule
from saddler.schedule.hub import Hub, Lock, Task
from saddler.scoring import figure

Say = Callable[[str], None]
TAIL = 1_000_000  # the rollout pool's priority of the test beside the minimization: after everything else


class Optimizer:
    """One run folder's optimization; `run()` starts it or resumes it where it stopped.

    A run whose results-affecting inputs changed since it started is refused (`ChangedInputsError`, exit 2)
    unless `allow_changed`; then the change is recorded as a `run.inputs_changed` event. `schedule` is the clock
    its events follow (default: `pipeline.default_schedule`), `pipeline` how much of its work overlaps (default:
    `loop.parallel_iterations` in flight); both are the bench's to choose, not the user's.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        quiet: bool = False,
        say: Say | None = None,
        progress: Progress | None = None,
        allow_changed: bool = False,
        sleep: Callable[[float], None] | None = None,
        wall_clock: Callable[[], float] = time.time,
        schedule: Schedule | None = None,
        pipeline: Pipeline | None = None,
    ) -> None:
        self.paths = RunPaths(Path(run_dir).resolve())
        self.cfg = load_run_config(self.paths.root)
        self.say: Say = say or (lambda _text: None)
        self.progress = progress or make_progress(quiet)
        self.allow_changed = allow_changed
        self.sleep, self.wall_clock = sleep, wall_clock
        self.schedule = schedule
        self.pipeline = pipeline or Pipeline(iterations=self.cfg.loop.parallel_iterations)

    def run(self) -> RunOutcome:
        require_ok(self.paths.root)  # a config that cannot work is refused before anything is written
        schedule = self.schedule or default_schedule(self.cfg)
        hub = Hub(virtual=schedule.virtual)
        with run_lock(self.paths.root) as lock, EvoDAG(self.paths.db, clock=store_clock(schedule, hub)) as store:
            hub.switch_guard = lambda: "an open store transaction" if store.conn.in_transaction else None
            recover_after_crash(self.paths, self.cfg.harness, lock.acquired_at, store, self.say)
            self.paths.traces.mkdir(parents=True, exist_ok=True)
            self.paths.sessions.mkdir(parents=True, exist_ok=True)
            ctx = open_context(
                self.paths, self.cfg, store, self.progress, say=self.say, sleep=self.sleep or hub.sleep,
                wall_clock=self.wall_clock,
            )  # fmt: skip
            pool = None
            try:
                pool = attach(ctx, hub, schedule, self.pipeline)
                self.state = ScheduleState(ctx, hub, pool)
                pool.observer = self.state.update
                inputs.check_inputs(ctx, self.allow_changed, self.say)
                return hub.run(lambda: self._run(ctx))
            finally:
                if pool is not None:
                    pool.close()
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
        reason = self._search(ctx, baseline)
        if reason == "paused":
            return self._paused(ctx)
        if ctx.cfg.minimize.enabled:  # the best harness cut to the changes that carry their weight on dev
            tests = self._test_ahead(ctx, baseline)
            minimize(ctx, self.say)
            if tests is not None:
                tests.result()
        return finish_run(ctx, baseline, reason, self.say)

    def _test_ahead(self, ctx: RunContext, baseline: Node) -> Task[None] | None:
        """The test of the baseline and of the full best, beside the minimization (the end of the run needs both
        whatever it cuts: the best, or the full harness beside a smaller one), in the sandboxes it leaves idle."""
        if not self.pipeline.together or ctx.hub is None:
            return None
        best = ctx.best()

        def test() -> None:
            PRIORITY.set((TAIL, 1))
            ctx.together(*(functools.partial(evaluate_test, ctx, n) for n in (baseline, best) if n.test_mean is None))

        return ctx.hub.spawn(test, "test ahead")

    def _search(self, ctx: RunContext, baseline: Node) -> str:
        """Keep `pipeline.iterations` iterations in flight until a stop condition holds (checked before each
        start), then wait for those in flight; the reason the search ended. Unfinished iterations of a killed run
        go on first."""
        hub = ctx.hub
        assert hub is not None
        iterations, _done, state = self._state(ctx)
        reason = ctx.stop.check(state)  # a stop asked before a resume leaves unfinished iterations as they are
        self.order = DiagnosisOrder(hub)
        self.line = Lock(hub, "the line")  # held from a kept change's carry to its iteration's end (saddler.run.carry)
        unfinished = [] if reason else [it for it in iterations if it.finished_at is None]
        for it in unfinished:  # resumed: every unfinished iteration, in the order they started
            self.order.started(it.number, answered=it.candidate_id is not None)
        flying = {it.number: self._fly(ctx, it, baseline) for it in unfinished}
        while True:
            iterations, _done, state = self._state(ctx)
            reason = reason or ctx.stop.check(replace(state, iterations_done=len(iterations)))  # started ones count
            if reason is None and len(flying) < self.pipeline.iterations:
                number = len(iterations) + 1
                current = flights.latest_kept(ctx, iterations, baseline)
                self.order.started(number)
                flying[number] = self._fly(ctx, flights.start(ctx, iterations, number, current), baseline)
                continue
            self.state.in_flight = list(flying)
            self.state.update(force=True)
            if not flying:  # a stop or pause asked while the last ones flew is the reason, as between iterations
                self._search_ended(ctx)
                return ctx.stop.sentinel() or reason or "max_iterations"
            landed = hub.wait_any(flying.values())
            flying = {number: task for number, task in flying.items() if task is not landed}
            landed.result()  # a system fault in an iteration ends the run

    def _search_ended(self, ctx: RunContext) -> None:
        """Record what the search used of the pool (the bench and the report read it), once per search."""
        assert ctx.pool is not None and ctx.hub is not None
        ctx.pool.utilisation()  # brings its account up to now
        payload = {"busy_seconds": round(ctx.pool.busy_seconds, 3), "seconds": round(ctx.hub.now(), 3),
                   "sandboxes": ctx.pool.sandboxes, "clock": "virtual" if ctx.hub.virtual else "real",
                   "parallel_iterations": self.pipeline.iterations}  # fmt: skip
        ctx.store.log_event(SEARCH_EVENT, payload, run_id=ctx.run_id)

    def _fly(self, ctx: RunContext, it: Iteration, baseline: Node) -> Task[None]:
        """Iteration `it` as a task of the scheduler (its commits dated by its number, its rollouts ranked by it)."""
        hub = ctx.hub
        assert hub is not None

        def fly() -> None:
            ITERATION.set(it.number)
            PRIORITY.set((it.number, 0))
            try:
                self._iteration(ctx, it, baseline)
            finally:
                self.order.answered(it.number)
                if self.line.holder is not None and self.line.holder is hub.current():
                    self.line.release()

        return hub.spawn(fly, f"iteration {it.number}")

    @staticmethod
    def _state(ctx: RunContext) -> tuple[list[Iteration], list[Iteration], LoopState]:
        """The iterations, the finished ones, and the numbers the stop conditions look at (the finished iterations,
        what was spent so far; a new iteration starts only while the started ones leave room: `_search`)."""
        iterations = ctx.iterations.read()
        done = flights.finished_in_order(iterations)
        cost = ctx.store.rollout_cost(ctx.run_id) + ctx.store.session_cost(ctx.run_id)
        dev = ctx.best().dev_mean
        rollouts = ctx.store.count_rollouts(ctx.run_id)
        return iterations, done, LoopState(len(done), rollouts, cost, dev, flights.stalls(iterations))

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

    # one iteration --------------------------------------------------------------------------------
    def _iteration(self, ctx: RunContext, it: Iteration, baseline: Node) -> None:
        """Iteration `it`, started (`flights.start`) or resumed where it stopped."""
        store, cfg = ctx.store, ctx.cfg
        number, batch = it.number, it.batch

        # 1. evolution picks the parent (from the latest kept node as the finished iterations say now)
        if it.parent_id is None:
            current = flights.latest_kept(ctx, ctx.iterations.read(), baseline)
            parent = evolve(ctx, it, current, self.say)
            it = store.update_iteration(it.id, parent_id=parent.id, step="evolved")
        else:
            parent = store.get_node(it.parent_id)
        # 2-3. the mini-batch, and the parent on it (cached rollouts are reused)
        before = ctx.eval_batch(parent, batch)
        if it.candidate_id is None and nothing_to_fix(before, ctx.score_kind):
            # nothing to diagnose (AutoSaddler's no_training_failures): no session is paid for
            self.say(f"iter {number:>3} [{it.phase}] n{parent.id} passes all {len(batch)} task(s): no diagnosis")
            flights.finish(ctx, it, NO_TRAINING_FAILURES, None)
            return
        if it.candidate_id is None:  # the phase follows what the failures point at (policies.phase_moves)
            it = phase_moves.follow_evidence(ctx, it, before)
        # 4-5. diagnosis-patch in an isolated worktree, then validation (retried with another hypothesis)
        if it.candidate_id is None and self.pipeline.diagnoses_in_order:
            self.order.wait_turn(number)  # what the iterations started before it try on this parent is known now
        cand = (
            store.get_node(it.candidate_id)
            if it.candidate_id is not None
            else diagnosis.patch(ctx, it, parent, before, self.say)
        )
        self.order.answered(number)
        if cand is None or cand.status == "invalid":
            flights.finish(ctx, it, "no_patch" if cand is None else "invalid", cand)
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
            flights.finish(ctx, it, "invalid", cand)
            return
        verdict, before, after = closecall.decide(ctx, it, parent, cand, before, after)
        verdict, movement = stepping_stone.keep_moved_tie(
            cfg.policies.keep_stepping_stones, parent, cand, verdict, before, after
        )
        if movement is not None:  # what became of the targeted failures, and whether the tie is kept for it
            moved = {"moved": movement.moved, "stuck": movement.stuck, "stone": verdict.verdict == NEUTRAL}
            ctx.note_evidence(it, "targeted_failures", moved)
        cand = store.update_node(cand.id, batch_before=verdict.before, batch_after=verdict.after)
        # with several iterations in flight, an accepted change whose parent the line has left is carried onto the
        # latest kept node, and dev judges it there (`saddler.run.carry`)
        if verdict.verdict in KEPT_DECISIONS and self.pipeline.iterations > 1:
            self.line.acquire()  # kept changes join the line one at a time, each onto the one before
            PRIORITY.set((0, 0))  # the line waits for this one: its rollouts go first
        judged = carry.target(ctx, it, parent, cand, verdict, baseline)
        dev_policy = cfg.policies.dev_eval
        unseen = unseen_tie.goes_to_dev(cfg.policies, cand, verdict, before)  # a tie train could not show
        to_dev = dev_policy == "always" or (dev_policy == "on_accept" and (verdict.verdict in KEPT_DECISIONS or unseen))
        node, against = judged.node, judged.against
        if to_dev and not judged.held:
            node = ctx.eval_dev(node, parent=against, kept=verdict.verdict in KEPT_DECISIONS)
        if unseen:
            verdict = unseen_tie.decide_on_dev(ctx, it, against, node, verdict)
        if not judged.held:
            verdict = ctx.guard_on_dev(it, against, node, verdict)  # accepted on train, clearly worse on dev: not kept
        status = verdict.verdict
        if node.id != cand.id:
            node = store.update_node(node.id, status=status, status_reason=audit.marked(ctx, node, verdict.reason))
        cand = store.update_node(cand.id, status=status, status_reason=audit.marked(ctx, cand, verdict.reason))
        shown = node if node.id != cand.id else cand
        best = ctx.update_best()
        # 7. the edge's transitions from the scores, then reflection, accepted or not (dev only as aggregates)
        reflection.reflect(ctx, it, parent, cand, status, before, after)
        self.say(
            f"iter {number:>3} [{it.phase}] n{parent.id} -> n{cand.id} {cand.origin}: {verdict.reason}"
            + (f"; carried onto n{against.id} as n{shown.id}" if shown.id != cand.id else "")
            + (f"; dev {figure(shown.dev_mean)}" if shown.dev_mean is not None else "")
            + f" | best n{best.id} dev {figure(best.dev_mean)}"
        )
        # 8. all in the EvoDAG before the next step
        flights.finish(ctx, it, status, cand)

"""Everything a run has open while it runs: store, harness space, benchmark, executor, backend, policies.

`RunContext` also holds the small operations the loop repeats (evaluate on a batch or on dev, read and update
the best node, build session requests) so `saddler.run.loop` reads as the method itself. Sessions go through
`calls` (`saddler.run.session_calls`): each is paid for once.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from evodag.decisions import KEPT_DECISIONS, KEPT_STATUSES
from evodag.errors import UnknownRunError
from evodag.models import Iteration, Node, RolloutRow
from evodag.store import EvoDAG
from evodag.view import write_session_view
from saddler.benchmark import SCORE_KINDS, Benchmark, Task, load_benchmark
from saddler.config import RunConfig
from saddler.errors import HarnessError, RolloutsFailedError
from saddler.executor import make_executor
from saddler.executor.environment import batch_env
from saddler.harness.gitcmd import unsafe_config
from saddler.harness.space import HarnessSpace
from saddler.policies import (
    Acceptance,
    AcceptanceDecision,
    BatchSampler,
    PhaseSchedule,
    StopConditions,
    make_acceptance,
    make_phase_schedule,
    make_ranking,
    make_sampler,
)
from saddler.policies.acceptance import dev_guard_clear, dev_guard_vetoes, task_outcomes
from saddler.ports import Executor, Progress, SessionBackend
from saddler.run import warmstart
from saddler.run.dev_race import DevRace, race_order
from saddler.run.evaluate import BatchSettings, Evaluator
from saddler.run.folder import RunPaths
from saddler.run.iteration_log import IterationLog
from saddler.run.outcomes import split_seeds
from saddler.run.session_calls import SessionCalls
from saddler.run.streaming import PRIORITY, Race
from saddler.run.usage_window import UsageWindow
from saddler.schedule import Pipeline
from saddler.schedule.hub import Hub
from saddler.schedule.pool import RolloutPool
from saddler.scoring import node_score
from saddler.sessions.registry import load_backend

T = TypeVar("T")


@dataclass
class RunContext:
    cfg: RunConfig
    paths: RunPaths
    store: EvoDAG
    run_id: int
    space: HarnessSpace
    benchmark: Benchmark
    tasks: dict[str, list[Task]]
    executor: Executor
    evaluator: Evaluator
    backend: SessionBackend
    calls: SessionCalls
    ranking: Callable[[Sequence[Node]], Node | None]
    sampler: BatchSampler
    phases: PhaseSchedule
    acceptance: Acceptance
    stop: StopConditions
    train_seeds: list[int]
    dev_seeds: list[int]
    test_seeds: list[int]
    score_kind: str = "pass_rate"  # `policies.score` resolved: the per-task score of acceptance, dev and test
    iterations: IterationLog = field(init=False)  # the run's iterations, read incrementally before each one
    hub: Hub | None = None  # the run's scheduler once it runs (`saddler.run.pipeline.attach`)
    pool: RolloutPool | None = None  # its pool of sandboxes
    pipeline: Pipeline = field(default_factory=Pipeline)  # how much of the run's work overlaps

    def __post_init__(self) -> None:
        self.iterations = IterationLog(self.store, self.run_id)

    @property
    def task_index(self) -> dict[str, Task]:
        return {t.id: t for ts in self.tasks.values() for t in ts}

    def eval_batch(self, node: Node, batch: list[str]) -> list[RolloutRow]:
        index = self.task_index
        tasks = [index[t] for t in batch]
        if self.cfg.loop.noise_rule == "two_then_majority":
            rows = self.evaluator.evaluate_majority(node, tasks, "train", self.train_seeds)
        else:
            rows = self.evaluator.evaluate(node, tasks, "train", self.train_seeds)
        return self._refuse_broken_baseline(node, rows)

    def _refuse_broken_baseline(self, node: Node, rows: list[RolloutRow]) -> list[RolloutRow]:
        """`refuse_broken_baseline`, knowing whether any rollout of the baseline stored so far ran."""
        if node.status != "baseline" or any(r.disposition != "infra_error" for r in rows):
            return rows
        stored = self.store.rollouts(run_id=self.run_id, node_id=node.id)
        return refuse_broken_baseline(node, rows, any(r.disposition != "infra_error" for r in stored))

    def eval_dev(self, node: Node, parent: Node | None = None, kept: bool = False) -> Node:
        """Dev score of `node` under `score_kind` (cached on the node once computed over the whole split). With a
        `parent` (a candidate's dev) and `policies.dev_race`, the evaluation races (`saddler.run.dev_race`): it
        stops once the rest cannot change what it decides (`kept`: the dev guard will judge it too), and the node
        records how many dev tasks its score covers. A node that stopped early is completed when asked again
        without a parent."""
        if node.dev_mean is not None and (node.dev_tasks is None or parent is not None):
            return node
        race = self._dev_race(parent, kept) if parent is not None else None
        tasks = race_order(self.tasks["dev"], self.cfg.seed) if race is not None else self.tasks["dev"]
        staged = PRIORITY.set((PRIORITY.get()[0], 1))  # after the iteration's decisions on train
        try:
            rows = self.evaluator.evaluate(node, tasks, "dev", self.dev_seeds, race=race)
        finally:
            PRIORITY.reset(staged)
        rows = self._refuse_broken_baseline(node, rows)
        score = node_score(rows, self.score_kind)
        covered = len({r.task_id for r in rows})
        whole = len(rows) >= len(tasks) * len(self.dev_seeds)
        return self.store.update_node(
            node.id, dev_mean=score.mean, dev_std=score.std, dev_tasks=None if whole else covered
        )

    def _dev_race(self, parent: Node, kept: bool) -> Race | None:
        """The race of a candidate's dev evaluation (None when `policies.dev_race` is off or nothing runs it)."""
        if not self.cfg.policies.dev_race or self.hub is None:
            return None
        guard = None
        if kept and self.cfg.policies.dev_guard:
            passes = len(self.dev_seeds)
            guard = task_outcomes([r for r in self.dev_rows(parent) if r.repetition < passes])
        conf = self.acceptance.confidence
        clear = (1.0 - conf) ** 2 if self.cfg.policies.dev_guard_evidence else 1.0 - conf
        race = DevRace(
            self.score_kind, len(self.tasks["dev"]), len(self.dev_seeds), lambda: self.best().dev_mean, guard, clear
        )
        return lambda rows: bool(race.decided(rows))

    def guard_on_dev(self, it: Iteration, parent: Node, cand: Node, verdict: AcceptanceDecision) -> AcceptanceDecision:
        """`verdict`, or a rejection when the paired comparison with its parent over the dev tasks vetoes a kept
        candidate (`policies.dev_guard`, `dev_guard_unsure`: `acceptance.dev_guard_vetoes`). With
        `policies.dev_guard_evidence`, a veto is decided on one pass only when that pass is already clear
        (`acceptance.dev_guard_clear`); otherwise both nodes first run one more repetition of dev (the next dev
        seed) and the guard decides on both passes; `dev_mean` stays the score of the run's own dev repetitions.
        Only aggregates go into the reason and the iteration's evidence (sessions read both)."""
        if not self.cfg.policies.dev_guard or verdict.verdict not in KEPT_DECISIONS:
            return verdict
        if cand.dev_mean is None or parent.dev_mean is None:
            return verdict
        passes = len(self.dev_seeds)
        dev = self.compare_on_dev(parent, cand, passes)
        veto = dev_guard_vetoes(verdict, dev, self.acceptance.confidence, self.cfg.policies.dev_guard_unsure)
        evidence = self.cfg.policies.dev_guard_evidence and not dev_guard_clear(dev, self.acceptance.confidence)
        if veto and evidence:  # one pass leaned against it, not clearly: one more decides
            passes += 1
            seed = split_seeds(self.cfg.seed, "dev", passes)[-1]
            self.together(
                *(
                    functools.partial(self.evaluator.evaluate, node, self.tasks["dev"], "dev", [seed], passes - 1)
                    for node in (parent, cand)
                )
            )
            dev = self.compare_on_dev(parent, cand, passes)
            veto = dev_guard_vetoes(verdict, dev, self.acceptance.confidence, self.cfg.policies.dev_guard_unsure)
        guard = {"confidence": dev.confidence, "tasks": len(dev.compared), "repetitions": passes}
        self.note_evidence(it, "dev_guard", guard)
        if not veto:
            return verdict
        why = (
            f"{verdict.reason}; not kept: {veto} ({parent.dev_mean:.3f} -> {cand.dev_mean:.3f}, "
            f"P(better) {dev.confidence:.2f} over {len(dev.compared)} dev task(s)"
            + (f", {passes} repetitions" if passes > 1 else "")
            + ")"
        )
        return replace(verdict, verdict="rejected", reason=why)

    def compare_on_dev(self, parent: Node, cand: Node, passes: int) -> AcceptanceDecision:
        """The acceptance's paired comparison of `cand` with `parent` over dev repetitions 0..`passes`-1 (a node
        may hold more: a second pass an earlier child's guard ran on it, which this pair has not)."""
        rows = {n.id: [r for r in self.dev_rows(n) if r.repetition < passes] for n in (parent, cand)}
        return self.acceptance.decide(task_outcomes(rows[parent.id]), task_outcomes(rows[cand.id]), final=False)

    def dev_rows(self, node: Node) -> list[RolloutRow]:
        """`node`'s dev rows its `dev_mean` rests on: every one, or for a node whose dev race stopped early those of
        the `dev_tasks` it covers (the first of the race's order; rollouts that landed after the race decided are
        stored but count nowhere)."""
        rows = self.store.rollouts(run_id=self.run_id, node_id=node.id, split="dev")
        if node.dev_tasks is None:
            return rows
        covered = {t.id for t in race_order(self.tasks["dev"], self.cfg.seed)[: node.dev_tasks]}
        return [r for r in rows if r.task_id in covered]

    def together(self, *parts: Callable[[], T]) -> list[T]:
        """Run `parts` (evaluations one decision needs) as one submission to the pool, their values in order: at once
        when the pipeline says so and the scheduler runs (`Pipeline.together`), else one after the other."""
        at_once = self.pipeline.together and self.hub is not None and self.hub.current() is not None
        if not at_once:
            return [part() for part in parts]
        assert self.hub is not None
        return self.hub.gather(*parts)

    def note_evidence(self, it: Iteration, key: str, value: Any) -> None:
        """Add `key` to the evidence stored on iteration `it` (read afresh: the decision wrote it after `it`)."""
        stored = self.store.get_iteration(it.id).evidence or {}
        self.store.update_iteration(it.id, evidence={**stored, key: value})

    def best(self) -> Node:
        """The run's best node as the loop last recorded it (`runs.best_node_id`); a pure read."""
        best_id = self.store.get_run(self.run_id).best_node_id
        if best_id is None:
            raise RuntimeError("the run has no best node recorded; the baseline records the first")
        return self.store.get_node(best_id)

    def update_best(self) -> Node:
        """Apply the ranking policy to the run's kept nodes (every ranking picks among those: `policies.ranking`)
        and record its pick in `runs.best_node_id` when it changed."""
        best = self.ranking(
            [n for status in KEPT_STATUSES for n in self.store.nodes(run_id=self.run_id, status=status)]
        )
        if best is None:
            raise RuntimeError("the run has no kept node, not even its baseline")
        if self.store.get_run(self.run_id).best_node_id != best.id:
            self.store.update_run(self.run_id, best_node_id=best.id)
        return best

    def session_paths(self) -> dict[str, Any]:
        """Where a session works: the run folder, the session view it queries (never the run's own EvoDAG) and
        the parts of the run folder it may read (`RunPaths.session_readable`)."""
        readable = self.paths.session_readable(self.cfg.harness)
        return {"run_dir": str(self.paths.root), "db_path": str(self.paths.session_db),
                "readable": [str(p) for p in readable]}  # fmt: skip


def refuse_broken_baseline(node: Node, rows: list[RolloutRow], ran_before: bool = False) -> list[RolloutRow]:
    """`rows`, unless `node` is the baseline and not one of its rollouts could run (all `infra_error`, and none of
    its earlier ones ran either: `ran_before`): then the benchmark or the machine is broken, and the run stops
    (`RolloutsFailedError`, exit 1) with the first error."""
    if node.status != "baseline" or not rows or ran_before or any(r.disposition != "infra_error" for r in rows):
        return rows
    first = rows[0]
    detail = (first.error_tail or first.rationale or "no error text").strip()
    where = f" (trace: {first.trace_path})" if first.trace_path else ""
    raise RolloutsFailedError(
        f"every one of the baseline's {len(rows)} {first.split} rollout(s) is an infra_error: the benchmark could "
        f"not run them, so there is nothing to optimize. The first ({first.task_id}){where}:\n{detail}"
    )


def open_context(
    paths: RunPaths,
    cfg: RunConfig,
    store: EvoDAG,
    progress: Progress,
    *,
    say: Callable[[str], None] = lambda _text: None,
    sleep: Callable[[float], None] | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> RunContext:
    """Open every collaborator of a run (creating the run row on first use). `sleep` and `wall_clock` are what
    a wait for a usage window uses (`saddler.run.usage_window`)."""
    space = HarnessSpace(paths.harness(cfg.harness), paths.worktrees)
    unsafe = unsafe_config(space.git_dir)
    if unsafe:
        raise HarnessError(
            f"the run's clone {space.git_dir} has git config that would run a program or read config from elsewhere "
            f"({', '.join(unsafe)}); saddler never writes these: remove them (`git config --file "
            f"{space.git_dir / 'config'} --unset KEY`), then run again"
        )
    space.prune()
    benchmark = load_benchmark(cfg.benchmark, cfg.benchmark_options)
    tasks = {s: benchmark.tasks(s) for s in ("train", "dev", "test")}
    kind = resolve_score_kind(cfg.policies.score, benchmark)
    try:
        run_id = store.get_run().id
    except UnknownRunError:
        stored = cfg.model_dump()
        stored["policies"]["score"] = kind  # the report reads which score the run used
        run_id = store.create_run(stored, cfg.seed).id
        describe_benchmark(store, run_id, benchmark, kind)
    warmstart.import_once(store, run_id, paths.root)  # another run's history, once (`saddler init --warm-start`)
    executor = make_executor(cfg.executor)
    backend = load_backend(cfg.sessions, benchmark=benchmark, run_dir=paths.root, seed=cfg.seed)
    cache = EvoDAG(cfg.executor.cache) if cfg.executor.cache else None
    fallback = getattr(backend, "use_fallback_model", lambda: False)
    window = UsageWindow(
        store, run_id, cfg.sessions, sleep=sleep or time.sleep, clock=wall_clock, say=say, use_fallback=fallback
    )
    evaluator = Evaluator(
        store,
        run_id,
        space,
        benchmark,
        cfg.benchmark,
        cfg.benchmark_options,
        executor,
        paths.root,
        cache_store=cache,
        progress=progress,
        batch=BatchSettings(cfg.executor.workers, batch_env(cfg.executor, cfg.benchmark), cfg.executor.timeout_s),
    )
    pol, loop = cfg.policies, cfg.loop
    train_ids = [t.id for t in tasks["train"]]
    reps = 3 if loop.noise_rule == "two_then_majority" else loop.repetitions
    return RunContext(
        cfg=cfg,
        paths=paths,
        store=store,
        run_id=run_id,
        space=space,
        benchmark=benchmark,
        tasks=tasks,
        executor=executor,
        evaluator=evaluator,
        backend=backend,
        calls=SessionCalls(
            store,
            run_id,
            backend,
            space,
            run_dir=paths.root,
            window=window,
            say=say,
            view=lambda: write_session_view(store, paths.session_db, run_id),
        ),
        ranking=make_ranking(pol.ranking),
        sampler=make_sampler(
            pol.sampler, train_ids, loop.batch_size, cfg.seed, pol.curriculum.temperature, pol.curriculum.unseen_share
        ),
        phases=make_phase_schedule(
            pol.phases,
            len(train_ids),
            pol.capability_epochs,
            pol.steering_allows_capability,
            pol.phase_transition,
            pol.phase_moves,
            pol.phase_patience,
            pol.phase_widening,
        ),
        acceptance=make_acceptance(
            pol.min_margin,
            pol.reject_task_regression,
            pol.accept_neutral,
            kind,
            pol.acceptance,
            pol.acceptance_confidence,
            benchmark.metric,
        ),
        stop=StopConditions(loop, paths.root),
        train_seeds=split_seeds(cfg.seed, "train", reps),
        dev_seeds=split_seeds(cfg.seed, "dev", loop.dev_runs),
        test_seeds=split_seeds(cfg.seed, "test", loop.test_runs),
        score_kind=kind,
    )


def resolve_score_kind(configured: str, benchmark: Benchmark) -> str:
    """`policies.score`, with `auto` replaced by the benchmark's `score_kind`."""
    kind = benchmark.score_kind if configured == "auto" else configured
    if kind not in SCORE_KINDS:
        raise ValueError(f"benchmark {benchmark.name}: score_kind {kind!r} is not one of {', '.join(SCORE_KINDS)}")
    return kind


def describe_benchmark(store: EvoDAG, run_id: int, benchmark: Benchmark, kind: str) -> None:
    """Record once what the reports need to know of the benchmark: its score kind, trace format and metric."""
    metric = benchmark.metric.to_dict() if benchmark.metric is not None else None
    payload = {"name": benchmark.name, "score": kind, "trace_format": benchmark.trace_format, "metric": metric}
    store.log_event("benchmark.described", payload, run_id=run_id)

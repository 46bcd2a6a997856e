"""Everything a run has open while it runs: store, harness space, benchmark, executor, backend, policies.

`RunContext` also holds the small operations the loop repeats (evaluate on a batch or on dev, record
a session, pick the best node, build session requests) so `saddler.run.loop` reads as the method itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evodag.errors import UnknownRunError
from evodag.models import Iteration, Node, RolloutRow
from evodag.store import EvoDAG
from saddler.benchmark import Benchmark, Task, load_benchmark
from saddler.config import RunConfig
from saddler.executor import make_executor
from saddler.harness.space import HarnessSpace
from saddler.policies import (
    Acceptance,
    BatchSampler,
    PhaseSchedule,
    StopConditions,
    make_acceptance,
    make_phase_schedule,
    make_sampler,
    pick_best,
)
from saddler.ports import Executor, Progress, SessionBackend
from saddler.run import evolution
from saddler.run.evaluate import Evaluator
from saddler.run.folder import RunPaths
from saddler.run.outcomes import evidence, split_seeds, transitions
from saddler.scoring import pass_at_1
from saddler.sessions.registry import load_backend
from saddler.sessions.schema import DiagnosisRequest, Hypothesis, ReflectionRequest, SessionStats


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
    sampler: BatchSampler
    phases: PhaseSchedule
    acceptance: Acceptance
    stop: StopConditions
    train_seeds: list[int]
    dev_seeds: list[int]
    test_seeds: list[int]

    @property
    def task_index(self) -> dict[str, Task]:
        return {t.id: t for ts in self.tasks.values() for t in ts}

    def eval_batch(self, node: Node, batch: list[str]) -> list[RolloutRow]:
        index = self.task_index
        tasks = [index[t] for t in batch]
        if self.cfg.loop.noise_rule == "two_then_majority":
            return self.evaluator.evaluate_majority(node, tasks, "train", self.train_seeds)
        return self.evaluator.evaluate(node, tasks, "train", self.train_seeds)

    def eval_dev(self, node: Node) -> Node:
        """Dev Pass@1 of `node` (cached on the node once computed)."""
        if node.dev_mean is not None:
            return node
        rows = self.evaluator.evaluate(node, self.tasks["dev"], "dev", self.dev_seeds)
        score = pass_at_1(rows)
        return self.store.update_node(node.id, dev_mean=score.mean, dev_std=score.std)

    def record_session(self, role: str, stats: SessionStats, iteration: int, node_id: int | None) -> None:
        self.store.add_session(
            self.run_id,
            role,
            stats.backend,
            iteration=iteration,
            node_id=node_id,
            **stats.model_dump(exclude={"backend"}),
        )

    def best(self) -> Node:
        best = pick_best(self.store.nodes(run_id=self.run_id))
        if best is None:
            raise RuntimeError("the run has no kept node, not even its baseline")
        if self.store.get_run(self.run_id).best_node_id != best.id:
            self.store.update_run(self.run_id, best_node_id=best.id)
        return best

    def diagnosis_request(
        self, it: Iteration, parent: Node, worktree: Path, rows: list[RolloutRow], attempt: int, excluded: list[str]
    ) -> DiagnosisRequest:
        comp = self.space.config.components
        return DiagnosisRequest(
            run_dir=str(self.paths.root),
            db_path=str(self.paths.db),
            worktree=str(worktree),
            iteration=it.number,
            parent_node_id=parent.id,
            phase=it.phase,
            allowed_kinds=self.phases.allowed_kinds(it.phase),
            component_globs={"capability": comp.capability, "steering": comp.steering, "protected": comp.protected},
            evidence=evidence(rows, self.task_index),
            exploration=it.exploration,
            lineage_origins=evolution.lineage_origins(self.store, parent.id),
            excluded=excluded,
            attempt=attempt,
            check_command=self.cfg.sessions.check_command or self.space.config.check_command,
        )

    def reflection_request(
        self, it: Iteration, parent: Node, cand: Node, decision: str, before: list[RolloutRow], after: list[RolloutRow]
    ) -> ReflectionRequest:
        hyp = cand.hypothesis or {}
        return ReflectionRequest(
            run_dir=str(self.paths.root),
            db_path=str(self.paths.db),
            iteration=it.number,
            parent_node_id=parent.id,
            candidate_node_id=cand.id,
            decision=decision,
            hypothesis=Hypothesis(**hyp) if "diagnosis" in hyp else None,
            diff=self.space.diff(parent.commit, cand.commit),
            files_changed=self.space.changed_files(parent.commit, cand.commit),
            transitions=transitions(before, after),
            parent_dev_mean=parent.dev_mean,
            candidate_dev_mean=cand.dev_mean,
            best_dev_mean=self.best().dev_mean,
        )


def open_context(paths: RunPaths, cfg: RunConfig, store: EvoDAG, progress: Progress) -> RunContext:
    """Open every collaborator of a run (creating the run row on first use)."""
    space = HarnessSpace(paths.harness(cfg.harness), paths.worktrees)
    space.prune()
    benchmark = load_benchmark(cfg.benchmark, cfg.benchmark_options)
    tasks = {s: benchmark.tasks(s) for s in ("train", "dev", "test")}
    try:
        run_id = store.get_run().id
    except UnknownRunError:
        run_id = store.create_run(cfg.model_dump(), cfg.seed).id
    executor = make_executor(cfg.executor)
    cache = EvoDAG(cfg.executor.cache) if cfg.executor.cache else None
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
        backend=load_backend(cfg.sessions, benchmark=benchmark, run_dir=paths.root, seed=cfg.seed),
        sampler=make_sampler(
            pol.sampler, train_ids, loop.batch_size, cfg.seed, pol.curriculum.temperature, pol.curriculum.unseen_share
        ),
        phases=make_phase_schedule(
            pol.phases, len(train_ids), pol.capability_epochs, pol.steering_allows_capability, pol.phase_transition
        ),
        acceptance=make_acceptance(pol.min_margin, pol.reject_task_regression, pol.accept_neutral),
        stop=StopConditions(loop, paths.root),
        train_seeds=split_seeds(cfg.seed, "train", reps),
        dev_seeds=split_seeds(cfg.seed, "dev", loop.dev_runs),
        test_seeds=split_seeds(cfg.seed, "test", loop.test_runs),
    )

"""Evaluate a node on tasks: reuse every rollout already known, execute only the misses, store as they land.

A rollout's identity is `rollout_cache_key(tree, task, split, seed, repetition, benchmark fp, model fp)`.
For each (task, repetition) the `Evaluator` reuses, in order: the node's own row with that key; any row in
the run's store with that key (`find_rollout`); the run's own `rollout_cache` table (`saddler fork` fills it
with its source's other rollouts); the shared cross-run cache (`cache_store.cache_get`). A reused row is copied
for this node with cost 0 (nothing was spent) and the original trace path. Misses run through the executor;
each result is inserted the moment it arrives (a crash loses nothing finished). A row of another node or run whose
trace no longer exists (its run folder was deleted) is a miss too: diagnosis reads traces, and a reused failure without
its trace would change the search the same seed makes.

Every executed rollout gets its own trace folder, `traces/n<node>/train/<task>-r<rep>-s<seed>/` for train and
`heldout/n<node>/<split>/...` for dev and test (`rollout_trace_dir`; sessions never see `heldout/`), so parallel
rollouts never share a file. A result without a `trace_path` whose folder
holds files points at that folder: diagnosis then reads the rollout's own traces, whatever they are named.
A rollout that failed because the disk is full is not stored as the candidate's failure: it raises
`DiskFullError`, so the resumed run executes it again.
"""

from __future__ import annotations

import contextvars
import errno
import functools
import hashlib
import math
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evodag.models import DISPOSITIONS, Node, RolloutRow
from evodag.store import EvoDAG
from saddler.benchmark import Batch, BatchBenchmark, BatchRollout, Benchmark, RolloutResult, Task, complete
from saddler.errors import DiskFullError, ExecutorError
from saddler.executor.base import RolloutJob, rollout_cache_key
from saddler.executor.environment import private_base, private_prefix
from saddler.harness.space import HarnessSpace
from saddler.ports import Executor, Progress
from saddler.reporting.progress import NullProgress
from saddler.run.faults import fault_point
from saddler.run.folder import RunPaths
from saddler.schedule.hub import Future, Hub
from saddler.schedule.pool import RolloutPool, Submission

_DISK_FULL = ("No space left on device", "Disk quota exceeded", "[Errno 28]")
_COPIED = (
    "score", "passed", "disposition", "llm_calls", "duration_s", "trace_path", "error_tail", "rationale",
    "failure_file",
)  # fmt: skip


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=@-]+")

Race = Callable[[list[RolloutRow]], bool]
"""Asked after each row of an evaluation lands (with the rows so far, in plan order): True when what the rest could
show can no longer change the decision the rows are for, so the rollouts not started are dropped."""

PRIORITY: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar("saddler_priority", default=(0,))
"""The rollout pool's priority of the calling task's rollouts (lower first): `(iteration, stage)`, set per task."""


def _in_order(plan: list[_Planned], rows: dict[str, RolloutRow]) -> list[RolloutRow]:
    """The rows known for `plan`, in its order (every item once the evaluation is complete)."""
    return [rows[item.key] for item in plan if item.key in rows]


def _decided(plan: list[_Planned], rows: dict[str, RolloutRow], race: Race | None) -> list[RolloutRow] | None:
    """The shortest prefix of `plan` whose rows have all landed and on which `race` decides, or None: a race decides
    on the rollouts' results in the plan's order, never on the order they landed in, so a resumed or forked run
    (whose rows come back from the store all at once) decides at the same point, on the same rows."""
    if race is None:
        return None
    out: list[RolloutRow] = []
    for item in plan:
        if item.key not in rows:
            return None
        out.append(rows[item.key])
        if len(out) < len(plan) and race(out):
            return out
    return None


def _cancel(sub: Submission, _decided: Future[None]) -> None:
    """Drop what `sub` has not started: its evaluation has decided."""
    sub.cancel()


def _all_done(hub: Hub, futures: list[Future[Any]]) -> Future[None]:
    """A future set once every one of `futures` is done (whatever each holds)."""
    done: Future[None] = Future(hub, "all")
    left = [len(futures)]

    def one(_f: Future[Any]) -> None:
        left[0] -= 1
        if left[0] == 0:
            done.set_result(None)

    if not futures:
        done.set_result(None)
    for future in futures:
        future.add_done_callback(one)
    return done


def rollout_trace_dir(run_dir: Path, node_id: int, split: str, task_id: str, repetition: int, seed: int) -> Path:
    """The trace folder of one rollout: `<trace root>/n<node>/<split>/<task>-r<rep>-s<seed>`, the trace root being
    `run_dir/traces` for train and `run_dir/heldout` for dev and test (`RunPaths.trace_root`). A task id that is
    not safe as one path component has anything but letters, digits and `._+=@-` replaced by `_` and a short
    digest of the id appended, so two ids never share a folder."""
    safe = _UNSAFE.sub("_", task_id).strip(".") or "task"
    if safe != task_id:
        safe += "~" + hashlib.sha256(task_id.encode()).hexdigest()[:8]
    return RunPaths(Path(run_dir)).trace_root(split) / f"n{node_id}" / split / f"{safe}-r{repetition}-s{seed}"


@dataclass(frozen=True)
class BatchSettings:
    """What a benchmark that runs whole batches (`BatchBenchmark`) gets from `[run.executor]`: how many rollouts
    at once, the scrubbed rollout environment, the time one rollout may take."""

    workers: int
    env: dict[str, str]
    timeout_s: float


@dataclass(frozen=True)
class _Planned:
    task: Task
    repetition: int
    seed: int
    key: str


class Evaluator:
    """Evaluates nodes of one run; `executed_count` counts rollouts actually executed (not reused)."""

    def __init__(
        self,
        store: EvoDAG,
        run_id: int,
        space: HarnessSpace,
        benchmark: Benchmark,
        benchmark_name: str,
        benchmark_options: dict[str, Any],
        executor: Executor,
        run_dir: Path,
        cache_store: EvoDAG | None = None,
        progress: Progress | None = None,
        batch: BatchSettings | None = None,
    ) -> None:
        self.store, self.run_id, self.space = store, run_id, space
        self.benchmark_name, self.benchmark_options = benchmark_name, dict(benchmark_options)
        self.executor, self.run_dir = executor, Path(run_dir)
        self.cache_store = cache_store
        self.progress: Progress = progress or NullProgress()
        benchmark = complete(benchmark)  # a plugin with only tasks + run gets the defaults
        self.batch_runner = benchmark if batch is not None and isinstance(benchmark, BatchBenchmark) else None
        self.batch = batch
        self.bench_fp = benchmark.fingerprint()
        self.model_fp = benchmark.model_fingerprint()
        self.executed_count = 0
        self._snapshots: Path | None = None
        self.pool: RolloutPool | None = None  # the run's pool, once its scheduler runs (`saddler.run.pipeline`)
        self._inflight: dict[str, Future[RolloutRow | None]] = {}  # rollouts submitted, not landed: their rows

    def evaluate(
        self,
        node: Node,
        tasks: list[Task],
        split: str,
        seeds: list[int],
        first_repetition: int = 0,
        race: Race | None = None,
    ) -> list[RolloutRow]:
        """Rows for every (task, repetition `first_repetition` + r with seed `seeds[r]`), ordered by (task order,
        repetition); with `race`, only those that landed before it decided (the rest were not run)."""
        plan = [
            self._plan(node, task, split, first_repetition + i, seed) for task in tasks for i, seed in enumerate(seeds)
        ]
        return self._evaluate(node, split, plan, race)

    def evaluate_majority(self, node: Node, tasks: list[Task], split: str, seeds3: list[int]) -> list[RolloutRow]:
        """Noise rule "2 runs, a third on disagreement": repetitions 0 and 1 for every task, repetition 2
        (seed `seeds3[2]`) only for tasks whose first two runs disagree on `passed`."""
        if len(seeds3) < 3:
            raise ValueError(f"evaluate_majority needs 3 seeds, got {len(seeds3)}")
        first = self.evaluate(node, tasks, split, list(seeds3[:2]))
        passed: dict[str, set[bool]] = {}
        for row in first:
            passed.setdefault(row.task_id, set()).add(row.passed)
        split_tasks = [t for t in tasks if len(passed.get(t.id, ())) > 1]
        third = self._evaluate(node, split, [self._plan(node, t, split, 2, seeds3[2]) for t in split_tasks])
        order = {t.id: i for i, t in enumerate(tasks)}
        return sorted(first + third, key=lambda r: (order[r.task_id], r.repetition))

    def _plan(self, node: Node, task: Task, split: str, rep: int, seed: int) -> _Planned:
        tree = self.space.tree_of(node.commit)  # remembered by the space: node commits are full shas
        key = rollout_cache_key(tree, task.id, split, seed, rep, self.bench_fp, self.model_fp)
        return _Planned(task, rep, seed, key)

    def _evaluate(self, node: Node, split: str, plan: list[_Planned], race: Race | None = None) -> list[RolloutRow]:
        own = {r.cache_key: r for r in self.store.rollouts(run_id=self.run_id, node_id=node.id, split=split)}
        known = self._known([item.key for item in plan if item.key not in own])
        rows: dict[str, RolloutRow] = {}
        misses: dict[str, _Planned] = {}
        for item in plan:
            if item.key in rows or item.key in misses:
                continue
            row = own.get(item.key) or self._reuse(node, split, item, known.get(item.key))
            if row is not None:
                rows[item.key] = row
            else:
                misses[item.key] = item
        reused = len(rows) - sum(1 for r in rows.values() if r.cache_key in own)
        if reused:
            self.progress.note(f"n{node.id} {split}: {reused} rollout(s) reused from the cache")
        if misses and _decided(plan, rows, race) is None:
            self._execute(node, split, list(misses.values()), rows, plan, race)
        decided = _decided(plan, rows, race)
        return decided if decided is not None else _in_order(plan, rows)

    def _known(self, keys: list[str]) -> dict[str, RolloutRow | dict[str, Any]]:
        """What is known of each key, in the order `_evaluate` trusts it: a stored rollout (any node, any run of this
        store), else this store's cache payload (a fork's copy of its source's other rollouts), else the shared
        cross-run cache's; keys known nowhere are absent. Three queries at most, whatever the number of keys."""
        known: dict[str, RolloutRow | dict[str, Any]] = dict(self.store.find_rollouts(keys))
        for cache in (self.store, self.cache_store):
            rest = [key for key in keys if key not in known]
            if cache is not None and rest:
                known.update(cache.cache_get_many(rest))
        return known

    def _reuse(
        self, node: Node, split: str, item: _Planned, found: RolloutRow | dict[str, Any] | None
    ) -> RolloutRow | None:
        """Copy `found` (what `_known` says of the item's key) as this node's rollout, or None when nothing is."""
        if found is None:
            return None
        if isinstance(found, RolloutRow):
            fields = {name: getattr(found, name) for name in _COPIED}
        else:
            fields = {name: found[name] for name in _COPIED if name in found}
            fields.setdefault("trace_path", None)
        if fields["trace_path"] and not Path(fields["trace_path"]).exists():
            return None  # the run that wrote its trace was deleted since: diagnosis would read nothing, run it again
        return self.store.add_rollout(**self._identity(node, split, item), **fields, cost=0.0)

    def _identity(self, node: Node, split: str, item: _Planned) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "node_id": node.id, "task_id": item.task.id, "split": split, "seed": item.seed,
            "repetition": item.repetition, "task_group": item.task.group, "cache_key": item.key,
        }  # fmt: skip

    def _snapshot(self, commit: str) -> str:
        """A read-only snapshot of `commit`'s files for the executor, which copies it for every rollout. Kept on
        tmpfs under this process's private prefix (swept if the optimizer dies), removed when the evaluator goes."""
        if self._snapshots is None:
            self._snapshots = Path(tempfile.mkdtemp(prefix=private_prefix() + "trees-", dir=private_base()))
            weakref.finalize(self, shutil.rmtree, self._snapshots, True)
        return str(self.space.snapshot(commit, self._snapshots))

    def _execute(
        self,
        node: Node,
        split: str,
        misses: list[_Planned],
        rows: dict[str, RolloutRow],
        plan: list[_Planned],
        race: Race | None,
    ) -> None:
        """Run `misses`: through the run's rollout pool when called from one of its tasks (streamed, shared with
        the other tasks, stopped early when `race` says the rest cannot change what it decides), else at once."""
        if self.pool is None or Hub.current() is None:
            self._execute_now(node, split, misses, rows)
            return
        hub = self.pool.hub
        pending = misses
        while pending:
            decided: Future[None] = Future(hub, "decided")
            ends: list[Future[Any]] = []
            mine = [item for item in pending if item.key not in self._inflight]

            def landed(rows: dict[str, RolloutRow] = rows, decided: Future[None] = decided) -> None:
                if race is not None and not decided.done() and _decided(plan, rows, race) is not None:
                    decided.set_result(None)

            for item in pending:
                if item in mine:
                    continue
                other = self._inflight[item.key]
                other.add_done_callback(functools.partial(self._copy, node, split, item, rows=rows, landed=landed))
                ends.append(other)
            if mine:
                sub = self._submit(node, split, mine, rows, landed, may_drop=race is not None)
                decided.add_done_callback(functools.partial(_cancel, sub))
                ends.append(sub.done)
            everything = _all_done(hub, ends)
            hub.wait_any([decided, everything])
            if decided.done():
                return
            for end in ends:
                if end.exception() is not None:
                    raise end.exception()  # type: ignore[misc]
            left = [item for item in pending if item.key not in rows]
            if len(left) == len(pending):
                raise ExecutorError(f"n{node.id} {split}: {len(left)} rollout(s) could not be run (cancelled)")
            pending = left  # rollouts another evaluation dropped before they started: run them here

    def _submit(
        self,
        node: Node,
        split: str,
        items: list[_Planned],
        rows: dict[str, RolloutRow],
        landed: Callable[[], None],
        may_drop: bool = False,
    ) -> Submission:
        """Hand `items` to the pool; each result is stored (and handed to whoever waits for the same rollout) as it
        lands. The submission's priority is the calling task's (`PRIORITY`)."""
        assert self.pool is not None
        harness_dir = self._snapshot(node.commit)
        tree = self.space.tree_of(node.commit)
        by_key = {item.key: item for item in items}
        for item in items:
            self._inflight[item.key] = Future(self.pool.hub, item.key)
        jobs = [self._job(node, split, item, harness_dir, tree) for item in items]

        def on_result(job: RolloutJob, result: RolloutResult) -> None:
            item = by_key[job.cache_key]
            try:
                self._store(node, split, item, result, rows)
            finally:
                waiting = self._inflight.pop(item.key, None)
                if waiting is not None:
                    waiting.set_result(rows.get(item.key))
            landed()

        sub = self.pool.submit(jobs, on_result, PRIORITY.get(), may_drop=may_drop)
        sub.done.add_done_callback(lambda _f: self._forget(items))
        return sub

    def _forget(self, items: list[_Planned]) -> None:
        """Rollouts of a finished submission that never ran (dropped by a race): whoever waited for them runs them."""
        for item in items:
            waiting = self._inflight.pop(item.key, None)
            if waiting is not None:
                waiting.set_result(None)

    def _copy(
        self,
        node: Node,
        split: str,
        item: _Planned,
        other: Future[Any],
        *,
        rows: dict[str, RolloutRow],
        landed: Callable[[], None],
    ) -> None:
        """Another evaluation's rollout of the same key landed: its row is this node's too (copied for another
        node, as a cached rollout is)."""
        row = other.result() if other.exception() is None else None
        if row is None or item.key in rows:
            return
        rows[item.key] = row if row.node_id == node.id else self._reuse(node, split, item, row) or row
        landed()

    def _job(self, node: Node, split: str, item: _Planned, harness_dir: str, tree: str) -> RolloutJob:
        return RolloutJob(
            benchmark=self.benchmark_name,
            benchmark_options=self.benchmark_options,
            harness_dir=harness_dir,
            commit=node.commit,
            tree=tree,
            task=item.task,
            split=split,
            seed=item.seed,
            repetition=item.repetition,
            trace_dir=str(self._trace_dir(node, split, item)),
            cache_key=item.key,
        )

    def _execute_now(self, node: Node, split: str, misses: list[_Planned], rows: dict[str, RolloutRow]) -> None:
        """Run `misses` in one executor call (or one batch), outside the run's pool: a command evaluating nodes."""
        harness_dir = self._snapshot(node.commit)
        if self.batch_runner is not None:
            self._execute_batch(node, split, misses, rows, Path(harness_dir))
            return
        tree = self.space.tree_of(node.commit)
        by_key = {item.key: item for item in misses}
        jobs = [self._job(node, split, item, harness_dir, tree) for item in misses]

        def on_result(job: RolloutJob, result: RolloutResult) -> None:
            self._store(node, split, by_key[job.cache_key], result, rows)

        self.progress.start(len(jobs), f"n{node.id} {split}")
        try:
            self.executor.run(jobs, on_result)
        except ExecutorError as exc:
            if isinstance(exc.__cause__, OSError) and exc.__cause__.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError("a rollout", exc.__cause__.filename or self.run_dir / "traces") from exc
            raise
        finally:
            self.progress.finish()

    def _execute_batch(
        self, node: Node, split: str, misses: list[_Planned], rows: dict[str, RolloutRow], harness_dir: Path
    ) -> None:
        """The misses as one batch of a `BatchBenchmark`, each result stored the moment it is handed on."""
        assert self.batch_runner is not None and self.batch is not None
        rollouts = {BatchRollout(m.task, m.seed, m.repetition, self._trace_dir(node, split, m)): m for m in misses}
        digest = hashlib.sha256("\n".join(sorted(m.key for m in misses)).encode()).hexdigest()[:12]
        folder = (
            RunPaths(self.run_dir).trace_root(split) / f"n{node.id}" / split / f"batch-{digest}"
        )  # dev, test: held out
        folder.mkdir(parents=True, exist_ok=True)
        batch = Batch(harness_dir, tuple(rollouts), folder, self.batch.workers, dict(self.batch.env),
                      self.batch.timeout_s)  # fmt: skip

        def on_result(rollout: BatchRollout, result: RolloutResult) -> None:
            self._store(node, split, rollouts[rollout], result, rows)

        self.progress.start(len(misses), f"n{node.id} {split}")
        try:
            self.batch_runner.run_batch(batch, on_result)
        finally:
            self.progress.finish()

    def run_as_batch(self, jobs: Sequence[RolloutJob], on_result: Callable[[RolloutJob, RolloutResult], None]) -> None:
        """`jobs` (one submission: one node, one split) as one batch of the `BatchBenchmark` (the pool's batch
        runner)."""
        assert self.batch_runner is not None and self.batch is not None
        first = jobs[0]
        by_rollout = {BatchRollout(j.task, j.seed, j.repetition, Path(j.trace_dir)): j for j in jobs}
        digest = hashlib.sha256("\n".join(sorted(j.cache_key for j in jobs)).encode()).hexdigest()[:12]
        folder = Path(first.trace_dir).parent / f"batch-{digest}"
        folder.mkdir(parents=True, exist_ok=True)
        batch = Batch(Path(first.harness_dir), tuple(by_rollout), folder, self.batch.workers, dict(self.batch.env),
                      self.batch.timeout_s)  # fmt: skip
        self.batch_runner.run_batch(batch, lambda rollout, result: on_result(by_rollout[rollout], result))

    def _trace_dir(self, node: Node, split: str, item: _Planned) -> Path:
        return rollout_trace_dir(self.run_dir, node.id, split, item.task.id, item.repetition, item.seed)

    def _store(
        self, node: Node, split: str, item: _Planned, result: RolloutResult, rows: dict[str, RolloutRow]
    ) -> None:
        """Store one executed rollout's result as this node's row (and in the shared cache)."""
        if item.key in rows:  # a retried task delivered twice: the first result stands
            return
        trace_dir = self._trace_dir(node, split, item)
        fault_point("rollout", str(trace_dir))
        if result.disposition == "infra_error" and any(m in result.error_tail for m in _DISK_FULL):
            raise DiskFullError(f"rollout {item.task.id}", str(trace_dir))  # the machine's fault, not the candidate's
        result = _with_trace(_sanitize(result), trace_dir)
        fields = {name: getattr(result, name) for name in _COPIED}
        rows[item.key] = self.store.add_rollout(**self._identity(node, split, item), **fields, cost=result.cost)
        if self.cache_store is not None:
            self.cache_store.cache_put(item.key, {**result.to_dict(), "task_group": item.task.group})
        self.executed_count += 1
        self.progress.advance()


def _with_trace(result: RolloutResult, trace_dir: Path) -> RolloutResult:
    """Point a result that names no trace at its rollout's trace folder, when the rollout wrote anything there."""
    if not result.trace_path and trace_dir.is_dir() and any(trace_dir.iterdir()):
        result.trace_path = str(trace_dir)
    return result


def _sanitize(result: RolloutResult) -> RolloutResult:
    """A result the store accepts: one that breaks the contract (an unknown disposition, a score that is not a
    number, `passed` that is not a bool) becomes an `infra_error` that says what was wrong (its score counts
    nowhere); the score is clamped to 0..1."""
    problems = []
    if result.disposition not in DISPOSITIONS:
        problems.append(f"unknown disposition {result.disposition!r} (one of {', '.join(DISPOSITIONS)})")
    if isinstance(result.score, bool) or not isinstance(result.score, int | float) or not math.isfinite(result.score):
        problems.append(f"score {result.score!r} is not a finite number")
    if not isinstance(result.passed, bool):
        problems.append(f"passed {result.passed!r} is not a bool")
    if problems:
        head = f"[saddler] the benchmark's RolloutResult breaks the contract: {'; '.join(problems)}"
        result.error_tail = f"{head}\n{result.error_tail}"[:2048]
        result.disposition, result.passed, result.score = "infra_error", False, 0.0
    result.score = min(1.0, max(0.0, float(result.score)))
    return result

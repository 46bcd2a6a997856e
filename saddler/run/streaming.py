"""Rollouts through the run's pool (`saddler.schedule.pool`), for `saddler.run.evaluate.Evaluator`: each result
stored the moment it lands, a rollout two evaluations need run once (the second waits for the first and copies its
row), and a race (`Race`) that drops what has not started once the rows so far decide (`saddler.run.dev_race`).

A race decides on the shortest prefix of the evaluation's plan whose rows have all landed (`decided_prefix`), never
on the order they landed in: a resumed or forked run, whose rows come back from the store at once, decides at the
same point on the same rows. Rollouts that land after it decided are stored (they ran) and count nowhere.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evodag.models import Node, RolloutRow
from saddler.benchmark import RolloutResult, Task
from saddler.errors import ExecutorError
from saddler.executor.base import RolloutJob
from saddler.schedule.hub import Future, Hub
from saddler.schedule.pool import RolloutPool, Submission

if TYPE_CHECKING:
    from saddler.harness.space import HarnessSpace


@dataclass(frozen=True)
class Planned:
    task: Task
    repetition: int
    seed: int
    key: str


Race = Callable[[list[RolloutRow]], bool]
"""Asked after each row of an evaluation lands (with the rows so far, in plan order): True when what the rest could
show can no longer change the decision the rows are for, so the rollouts not started are dropped."""

PRIORITY: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar("saddler_priority", default=(0,))
"""The rollout pool's priority of the calling task's rollouts (lower first): `(iteration, stage)`, set per task."""


def in_order(plan: list[Planned], rows: dict[str, RolloutRow]) -> list[RolloutRow]:
    """The rows known for `plan`, in its order (every item once the evaluation is complete)."""
    return [rows[item.key] for item in plan if item.key in rows]


def decided_prefix(plan: list[Planned], rows: dict[str, RolloutRow], race: Race | None) -> list[RolloutRow] | None:
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


class PoolRuns:
    """The pool's side of the `Evaluator` (a mixin: it stores through the evaluator's own methods)."""

    pool: RolloutPool | None
    space: HarnessSpace
    _inflight: dict[str, Future[RolloutRow | None]]

    def _store(self, node: Node, split: str, item: Planned, result: RolloutResult, rows: dict[str, RolloutRow]) -> None:
        raise NotImplementedError  # provided by the Evaluator

    def _reuse(
        self, node: Node, split: str, item: Planned, found: RolloutRow | dict[str, Any] | None
    ) -> RolloutRow | None:
        raise NotImplementedError  # provided by the Evaluator

    def _snapshot(self, commit: str) -> str:
        raise NotImplementedError  # provided by the Evaluator

    def _job(self, node: Node, split: str, item: Planned, harness_dir: str, tree: str) -> RolloutJob:
        raise NotImplementedError  # provided by the Evaluator

    def _execute_now(self, node: Node, split: str, misses: list[Planned], rows: dict[str, RolloutRow]) -> None:
        raise NotImplementedError  # provided by the Evaluator

    def _execute(
        self,
        node: Node,
        split: str,
        misses: list[Planned],
        rows: dict[str, RolloutRow],
        plan: list[Planned],
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
                if race is not None and not decided.done() and decided_prefix(plan, rows, race) is not None:
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
        items: list[Planned],
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

    def _forget(self, items: list[Planned]) -> None:
        """Rollouts of a finished submission that never ran (dropped by a race): whoever waited for them runs them."""
        for item in items:
            waiting = self._inflight.pop(item.key, None)
            if waiting is not None:
                waiting.set_result(None)

    def _copy(
        self,
        node: Node,
        split: str,
        item: Planned,
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

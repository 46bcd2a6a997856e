"""A fake dev evaluator for tests of decisions made on dev (the dev guard, a tie train could not show)."""

from __future__ import annotations

from dataclasses import dataclass, field

from evodag.models import Node, RolloutRow
from saddler.benchmark import Task
from saddler.run.context import RunContext


@dataclass
class FakeDev:
    """Every dev task passes, except that at repetition r the candidate (node `cand`) fails the first `fails[r]`
    dev tasks and its parent the last `parent_fails[r]` (missing: 0): noise that goes both ways when both are
    set. `calls` lists (node id, first repetition, seeds) of every evaluation."""

    ctx: RunContext
    cand: int = -1
    fails: tuple[int, ...] = ()
    parent_fails: tuple[int, ...] = ()
    calls: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)

    def evaluate(
        self,
        node: Node,
        tasks: list[Task],
        split: str,
        seeds: list[int],
        first_repetition: int = 0,
        race: object = None,  # the Evaluator's dev race: never asked of a fake (no scheduler runs)
    ) -> list[RolloutRow]:
        self.calls.append((node.id, first_repetition, tuple(seeds)))
        out = []
        for i, task in enumerate(tasks):
            for offset, seed in enumerate(seeds):
                rep = first_repetition + offset
                counts = self.fails if node.id == self.cand else self.parent_fails
                failing = counts[rep] if rep < len(counts) else 0
                passed = i >= failing if node.id == self.cand else i < len(tasks) - failing
                out.append(
                    self.ctx.store.add_rollout(
                        run_id=self.ctx.run_id, node_id=node.id, task_id=task.id, split=split, seed=seed,
                        repetition=rep, score=float(passed), passed=passed,
                        disposition="success" if passed else "task_failure", cache_key=f"{node.id}:{task.id}:{seed}",
                    )
                )  # fmt: skip
        return out

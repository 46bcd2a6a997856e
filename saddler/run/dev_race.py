"""Dev races (`policies.dev_race`): a candidate's dev evaluation stops as soon as the rest of dev cannot change what
it decides, so no dev rollout is spent where the outcome is already known.

Dev is the split the answer is chosen on: the best node, and every node that may still become the best, get all
of it. A kept candidate's dev evaluation decides two things, and each is settled early in one direction only:

- **it cannot become the best**: even if every dev rollout not run yet passed, its dev mean would stay below the
  best node's (`LoopState`'s best: a node with the whole dev split; it only rises, and the race reads it afresh
  after every result, as other iterations finish). Then it can be neither the answer nor ahead of it;
- **the dev guard has decided on it**: even if every dev task not run yet were a win over its parent, P(better)
  would stay at or below the guard's clear line (`acceptance.dev_guard_clear`: no second pass would be asked).

Its rollouts go in a seeded order of the dev tasks (one order per run, so two nodes stopped early cover the same
first tasks and compare on them); a node stopped early records how many dev tasks its `dev_mean` covers
(`Node.dev_tasks`), and only nodes with the whole split compete for the best (`saddler.policies.ranking`). A node
the search later needs whole (the evolution builds on it, the minimization starts from it) gets the rest then.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from evodag.models import RolloutRow
from saddler.benchmark import Task
from saddler.policies.acceptance import TaskOutcome, better_confidence, task_outcomes
from saddler.scoring import counted, task_value


def race_order(tasks: list[Task], seed: int) -> list[Task]:
    """The run's dev tasks in the seeded order every race runs them in."""
    order = sorted(tasks, key=lambda t: t.id)
    random.Random(f"{seed}:dev-race").shuffle(order)
    return order


@dataclass(frozen=True)
class DevRace:
    """When a dev evaluation of `tasks` x `repetitions` rollouts has decided (see the module docstring). `best`
    reads the best node's dev now (None: nothing to beat); `parent`, when the dev guard will judge the node, is its
    parent's dev per task, and `clear` the guard's clear line."""

    kind: str
    tasks: int
    repetitions: int
    best: Callable[[], float | None]
    parent: dict[str, TaskOutcome] | None = None
    clear: float = 0.0

    def decided(self, rows: list[RolloutRow]) -> str:
        """Why the rows so far settle it ('' while they do not)."""
        if len(rows) >= self.tasks * self.repetitions:
            return ""  # complete: nothing left to save
        best = self.best()
        ceiling = self.ceiling(rows)
        if best is not None and ceiling < best - 1e-9:
            return f"cannot reach the best node's dev {best:.3f} (at most {ceiling:.3f} if every rest passed)"
        if self.parent is not None:
            p_better = self.best_case_against_parent(rows)
            if p_better <= self.clear:
                return f"clearly worse than its parent on dev whatever the rest show (P(better) at most {p_better:.2f})"
        return ""

    def ceiling(self, rows: list[RolloutRow]) -> float:
        """The highest dev mean the node can end with: every rollout not run yet counted with the top value."""
        per_rep: dict[int, list[float]] = defaultdict(list)
        seen: dict[int, int] = defaultdict(int)
        for row in rows:
            seen[row.repetition] += 1
        for scored in counted(rows):
            per_rep[scored.repetition].append(task_value(scored, self.kind))
        means = []
        for rep in range(max([self.repetitions, *(r + 1 for r in seen)])):
            missing = max(0, self.tasks - seen.get(rep, 0))
            values = per_rep.get(rep, [])
            means.append((sum(values) + missing) / (len(values) + missing) if values or missing else 0.0)
        return sum(means) / len(means) if means else 1.0

    def best_case_against_parent(self, rows: list[RolloutRow]) -> float:
        """P(better) over the parent if every dev task not complete yet were a win (by what the parent lacks)."""
        assert self.parent is not None
        got = task_outcomes(rows)
        complete = {t for t, o in got.items() if len(o.scores) >= self.repetitions}
        wins = losses = 0.0
        for task, before in self.parent.items():
            if not before.valid:
                continue
            after = got.get(task)
            if task in complete and after is not None:
                if not after.valid:
                    continue
                diff = after.value(self.kind) - before.value(self.kind)
                wins, losses = wins + max(diff, 0.0), losses + max(-diff, 0.0)
            else:
                wins += 1.0 - before.value(self.kind)
        return better_confidence(wins, losses)

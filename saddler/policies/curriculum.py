"""A curriculum sampler after ActiveSaddler: failure patterns as bandit arms, pulled by softmax, with unseen
tasks mixed in so coverage still grows.

ActiveSaddler lets optimizer sessions name the failure patterns and score the arms. Here both come from
what rollout rows hold, so the policy costs no session and stays deterministic:

- **arms**: the train tasks the reference node (the latest kept node) is believed to fail, grouped by failure
  signature (`<failure file> :: <grader check>`, `evodag.history.failure_signature`);
- **arm value**: the mean of its *breadth* (its share of the failing tasks) and its *freshness*
  (1 / (1 + mean tries), where a try is an earlier iteration that showed the task and kept nothing), so an
  arm that keeps resisting patches cools down and the others get their turn (a non-stationary bandit);
- **pull**: one arm drawn with probability softmax(value / temperature); up to the batch size of its tasks
  are drawn (seeded);
- **draw**: `unseen_share` of every batch goes to never-shown tasks (a fixed seeded permutation), or, once
  every task has been shown, to the seen tasks not known to fail, least recently shown first (they re-check
  old passes and guard against regressions). With no arm at all (a cold start, or nothing known to fail)
  the whole batch is drawn this way.
- **in flight**: while other iterations run (`SamplerState.in_flight`), an arm one of them holds a task of is
  left to it when another arm is free, and tasks they hold come last among the draws and the fill: two
  proposers do not chase the same failure while others remain.

A batch is a pure function of (seed, task ids, iteration index, `SamplerState`); the loop stores it on the
iteration row, so a resumed run reuses it.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass, field

from saddler.policies.sampler import SamplerState


def softmax(values: dict[str, float], temperature: float) -> dict[str, float]:
    """Softmax of `values / temperature` (numerically stable); {} for no values."""
    if not values:
        return {}
    top = max(values.values())
    weights = {k: math.exp((v - top) / temperature) for k, v in values.items()}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


def arm_values(arms: dict[str, list[str]], tries: dict[str, int] | None = None) -> dict[str, float]:
    """Each arm's value in [0, 1]: mean of breadth (share of failing tasks) and freshness (1 / (1 + mean tries))."""
    tries = tries or {}
    total = sum(len(tasks) for tasks in arms.values())
    values = {}
    for arm, tasks in arms.items():
        mean_tries = sum(tries.get(t, 0) for t in tasks) / len(tasks)
        values[arm] = (len(tasks) / total + 1.0 / (1.0 + mean_tries)) / 2.0
    return values


@dataclass
class CurriculumSampler:
    """See the module docstring. `temperature` > 0; `unseen_share` in [0, 1]."""

    task_ids: list[str]
    batch_size: int
    seed: int
    temperature: float = 0.15
    unseen_share: float = 0.34
    adaptive = True
    _order: list[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.task_ids:
            raise ValueError("the train split has no tasks")
        if self.temperature <= 0:
            raise ValueError(f"the curriculum temperature must be > 0, not {self.temperature}")
        self.batch_size = min(self.batch_size, len(self.task_ids))
        self._order = sorted(self.task_ids)
        random.Random(f"{self.seed}:curriculum:order").shuffle(self._order)

    def arms(self, state: SamplerState) -> dict[str, list[str]]:
        """Failure signature -> the train tasks failing with it (sorted), for the tasks in this split."""
        known = set(self.task_ids)
        arms: dict[str, list[str]] = defaultdict(list)
        for task, signature in sorted(state.failing.items()):
            if task in known:
                arms[signature].append(task)
        return dict(arms)

    def probabilities(self, state: SamplerState) -> dict[str, float]:
        """The probability of pulling each arm next."""
        return self._probabilities(self.arms(state), state)

    def _probabilities(self, arms: dict[str, list[str]], state: SamplerState) -> dict[str, float]:
        """`probabilities` from the `arms` of `state`, already computed."""
        return softmax(arm_values(arms, dict(state.tries)), self.temperature)

    def _draws(self, state: SamplerState, failing: set[str]) -> list[str]:
        """Tasks for the draw share, in order: unseen ones, then seen ones not known to fail, least recent first;
        those an iteration in flight holds after all the others."""
        unseen = [t for t in self._order if t not in state.seen]
        rank = {t: i for i, t in enumerate(self._order)}
        seen = sorted(
            (t for t in self._order if t in state.seen and t not in failing),
            key=lambda t: (state.last_shown.get(t, -1), rank[t]),
        )
        return _free_first(unseen + seen, state.in_flight)

    def batch(self, index: int, state: SamplerState | None = None) -> tuple[int, list[str]]:
        state = state or SamplerState()
        k = self.batch_size
        arms = self.arms(state)
        failing = {t for tasks in arms.values() for t in tasks}
        draws = self._draws(state, failing)
        epoch = state.shown // len(self.task_ids)
        if not arms:
            return epoch, draws[:k]
        rng = random.Random(f"{self.seed}:curriculum:{index}")
        free = {name: tasks for name, tasks in arms.items() if not state.in_flight.intersection(tasks)}
        arms = free or arms  # an arm an iteration in flight holds is left to it while another is free
        probs = self._probabilities(arms, state)
        names = sorted(probs)
        arm = rng.choices(names, weights=[probs[n] for n in names])[0]
        n_draw = min(len(draws), k - 1, max(1, round(k * self.unseen_share))) if self.unseen_share > 0 else 0
        pulled = rng.sample(arms[arm], min(k - n_draw, len(arms[arm])))
        # an arm smaller than its share: the other failing tasks, likeliest arms first, then more draws
        others = [t for n in sorted(names, key=lambda n: (-probs[n], n)) if n != arm for t in arms[n]]
        others += [t for t in sorted(failing) if t not in others and t not in arms[arm]]  # held arms' tasks last
        others = _free_first(others, state.in_flight)
        picked = pulled + others[: max(0, k - n_draw - len(pulled))]
        picked += [t for t in draws if t not in picked][: k - len(picked)]
        picked += [t for t in arms[arm] + others if t not in picked][: k - len(picked)]  # too few draws left
        return epoch, picked


def _free_first(tasks: list[str], held: frozenset[str]) -> list[str]:
    """`tasks` with those an iteration in flight holds moved to the end (the order kept otherwise)."""
    return [t for t in tasks if t not in held] + [t for t in tasks if t in held] if held else tasks

"""Mini-batch samplers over the train split.

Contract: `batch(index, state)` is a pure function of (seed, task ids, index, state), where `state` is what
the store said before iteration `index` (`SamplerState`); the loop stores each batch on its iteration row, so
a resumed run reuses it. The epoch and full samplers ignore `state`; the curriculum sampler
(`saddler.policies.curriculum`) adapts to it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from saddler.ports import BatchSampler


@dataclass(frozen=True)
class SamplerState:
    """What the run knows before an iteration, as an adaptive sampler and the phase schedule read it.

    - `shown`: train tasks shown by earlier iterations, repeats counted (epochs = shown / train size);
    - `seen`: the distinct train tasks shown so far;
    - `last_shown`: task -> the 0-based index of the last iteration that showed it;
    - `failing`: task -> failure signature, for the tasks the reference node (the latest kept node) is believed
      to fail: its own train rollouts, else its nearest evaluated ancestor's;
    - `tries`: task -> earlier iterations that showed it and kept nothing (rejected, invalid, no patch);
    - `in_flight`: the train tasks of the iterations still running (several run at once): an adaptive sampler
      leaves their failures to them while others remain.
    """

    shown: int = 0
    seen: frozenset[str] = frozenset()
    last_shown: Mapping[str, int] = field(default_factory=dict)
    failing: Mapping[str, str] = field(default_factory=dict)
    tries: Mapping[str, int] = field(default_factory=dict)
    in_flight: frozenset[str] = frozenset()


@dataclass
class EpochSampler:
    """Epoch-wise without replacement: each epoch is a seeded permutation cut into batches."""

    task_ids: list[str]
    batch_size: int
    seed: int
    adaptive = False

    def __post_init__(self) -> None:
        if not self.task_ids:
            raise ValueError("the train split has no tasks")
        self.batch_size = min(self.batch_size, len(self.task_ids))
        self._per_epoch = -(-len(self.task_ids) // self.batch_size)

    def _permutation(self, epoch: int) -> list[str]:
        order = sorted(self.task_ids)
        random.Random(f"{self.seed}:epoch:{epoch}").shuffle(order)
        return order

    def batch(self, index: int, state: SamplerState | None = None) -> tuple[int, list[str]]:
        epoch, slot = divmod(index, self._per_epoch)
        perm = self._permutation(epoch)
        return epoch, perm[slot * self.batch_size : (slot + 1) * self.batch_size]


@dataclass
class FullSampler:
    """Every iteration sees the whole train split (Meta-Harness-style full-batch evaluation)."""

    task_ids: list[str]
    adaptive = False

    def batch(self, index: int, state: SamplerState | None = None) -> tuple[int, list[str]]:
        return index, sorted(self.task_ids)


def make_sampler(
    name: str, task_ids: list[str], batch_size: int, seed: int, temperature: float = 0.15, unseen_share: float = 0.34
) -> BatchSampler:
    """`epoch` (default), `full`, or `curriculum` (with its softmax `temperature` and `unseen_share`)."""
    if name == "full":
        return FullSampler(task_ids)
    if name == "curriculum":
        from saddler.policies.curriculum import CurriculumSampler

        return CurriculumSampler(task_ids, batch_size, seed, temperature, unseen_share)
    return EpochSampler(task_ids, batch_size, seed)

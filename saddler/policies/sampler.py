"""Mini-batch samplers over the train split.

Contract: `batch(index)` is a pure function of (seed, task ids, index) so a resumed run draws the
same batches. `tasks_seen(index)` counts train tasks shown before iteration `index` (phase schedule).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from saddler.ports import BatchSampler


@dataclass
class EpochSampler:
    """Epoch-wise without replacement: each epoch is a seeded permutation cut into batches."""

    task_ids: list[str]
    batch_size: int
    seed: int

    def __post_init__(self) -> None:
        if not self.task_ids:
            raise ValueError("the train split has no tasks")
        self.batch_size = min(self.batch_size, len(self.task_ids))
        self._per_epoch = -(-len(self.task_ids) // self.batch_size)

    def _permutation(self, epoch: int) -> list[str]:
        order = sorted(self.task_ids)
        random.Random(f"{self.seed}:epoch:{epoch}").shuffle(order)
        return order

    def batch(self, index: int) -> tuple[int, list[str]]:
        epoch, slot = divmod(index, self._per_epoch)
        perm = self._permutation(epoch)
        return epoch, perm[slot * self.batch_size : (slot + 1) * self.batch_size]

    def tasks_seen(self, index: int) -> int:
        epoch, slot = divmod(index, self._per_epoch)
        return epoch * len(self.task_ids) + min(slot * self.batch_size, len(self.task_ids))


@dataclass
class FullSampler:
    """Every iteration sees the whole train split (Meta-Harness-style full-batch evaluation)."""

    task_ids: list[str]

    def batch(self, index: int) -> tuple[int, list[str]]:
        return index, sorted(self.task_ids)

    def tasks_seen(self, index: int) -> int:
        return index * len(self.task_ids)


def make_sampler(name: str, task_ids: list[str], batch_size: int, seed: int) -> BatchSampler:
    if name == "full":
        return FullSampler(task_ids)
    return EpochSampler(task_ids, batch_size, seed)

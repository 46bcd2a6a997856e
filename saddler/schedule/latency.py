"""How long a session and a rollout take, as seeded lognormal draws: the latencies of the virtual clock.

A `LatencyModel` gives the median seconds of each session role and of a rollout, with the spread of each
(the sigma of the log). Every draw is keyed by what it times — the session's (iteration, role, attempt), the
rollout's identity (its cache key) and its task — so a session or rollout takes the same time whenever and
wherever it is drawn: the virtual clock, and with it the run's order of events, is a pure function of the run.

A rollout's time is its task's own length (some tasks take longer on every harness: a factor drawn once per task)
times the rollout's own noise; the two spreads add to `rollout_sigma` (sqrt of the sum of squares), so a
`rollout_sigma` of 1.0 is the unevenness the wall-time issue measured rollouts by.

`ASSUMED` is the model a run is planned and ordered with when nothing was measured: the API-fast scenario of
the wall-time issue (issue 51: a diagnosis session of 120 s, reflection and evolution 20 s, a rollout of 60 s,
rollouts lognormal with sigma 1). `bench/wallclock.py` names the other scenarios and their sources.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

ROLES = ("diagnosis_patch", "reflection", "evolution")


@dataclass(frozen=True)
class LatencyModel:
    """Median seconds per session role and per rollout, with their lognormal spreads; `seed` salts every draw."""

    name: str
    diagnosis_patch_s: float
    reflection_s: float
    evolution_s: float
    rollout_s: float
    rollout_sigma: float = 1.0
    session_sigma: float = 0.5
    task_share: float = 0.5  # of the rollout spread's variance: the task's own length (the rest: each rollout's)
    seed: int = 0

    def session(self, role: str, key: str) -> float:
        """Seconds of the session of `role` keyed `key` (e.g. `"7:diagnosis_patch:0"`)."""
        median = {"diagnosis_patch": self.diagnosis_patch_s, "reflection": self.reflection_s}.get(
            role, self.evolution_s
        )
        return median * math.exp(self.session_sigma * _normal(self.seed, "session", role, key))

    def rollout(self, task_id: str, key: str) -> float:
        """Seconds of the rollout `key` (its cache key) of task `task_id`."""
        task_sigma = self.rollout_sigma * math.sqrt(self.task_share)
        own_sigma = self.rollout_sigma * math.sqrt(1.0 - self.task_share)
        z = task_sigma * _normal(self.seed, "task", task_id) + own_sigma * _normal(self.seed, "rollout", key)
        return self.rollout_s * math.exp(z)

    def scaled(self, **medians: float) -> LatencyModel:
        """This model with other medians (e.g. measured ones); the spreads stay."""
        fields = {**self.__dict__, **medians}
        return LatencyModel(**fields)


def _normal(*parts: object) -> float:
    """A standard normal draw keyed by `parts` (a string hash: the same parts give the same draw)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return random.Random(digest).gauss(0.0, 1.0)


ASSUMED = LatencyModel("api_fast", diagnosis_patch_s=120.0, reflection_s=20.0, evolution_s=20.0, rollout_s=60.0)
"""The latencies a run is planned and ordered with before anything is measured (see the module docstring)."""

"""Search policies, each a small object chosen by name in `[run.policies]`.

Together they make the paper's ablations and other strategies (greedy keep/discard, full-batch)
configurations rather than forks: `saddler.run.context.open_context` builds them from the run's config.
"""

from saddler.policies.acceptance import Acceptance, AcceptanceDecision, make_acceptance
from saddler.policies.phases import PhaseSchedule, make_phase_schedule
from saddler.policies.ranking import make_ranking, pick_best
from saddler.policies.sampler import make_sampler
from saddler.policies.stopping import StopConditions
from saddler.ports import BatchSampler

__all__ = [
    "Acceptance",
    "AcceptanceDecision",
    "BatchSampler",
    "PhaseSchedule",
    "StopConditions",
    "make_acceptance",
    "make_phase_schedule",
    "make_ranking",
    "make_sampler",
    "pick_best",
]

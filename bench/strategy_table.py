"""The strategies `bench/strategies.py` compares, by name: each one's `[run]` overrides of the default (`full`),
the defaults issue 19 chose with the strategy that differs only there, the GEPA strategies, and the cells."""

from __future__ import annotations

from typing import Any

STRATEGIES: dict[str, dict[str, Any]] = {
    "full": {},  # the default
    # AutoSaddler as published: strict-mean acceptance, the fixed phase schedule, the epoch sampler
    "paper": {
        "policies": {
            "acceptance": "strict_mean",
            "phase_moves": "fixed",
            "sampler": "epoch",
            "dev_guard": False,
            "exclude_worse_on_lineage": False,
            "keep_stepping_stones": False,
            "unseen_tie_on_dev": False,
        }
    },
    "no_dev_guard": {"policies": {"dev_guard": False}},
    "dev_guard_one_pass": {"policies": {"dev_guard_evidence": False}},  # the guard vetoes on one pass of dev
    "no_lineage_exclusion": {"policies": {"exclude_worse_on_lineage": False}},  # a clear loss excludes on its parent
    "no_stepping_stones": {"policies": {"keep_stepping_stones": False}},  # a tie is rejected whatever moved
    "no_unseen_tie": {"policies": {"unseen_tie_on_dev": False}},  # a tie train could not show is rejected
    "unsure_dev_guard": {"policies": {"dev_guard_unsure": 0.5}},  # dev decides train's unsure accepts too
    "strict_mean": {"policies": {"acceptance": "strict_mean"}},  # no close-call evidence
    "fixed_phases": {"policies": {"phase_moves": "fixed"}},  # no phase moves on evidence
    "epoch_sampler": {"policies": {"sampler": "epoch"}},
    "phases_off": {"policies": {"phases": "none"}},
    "late_capability": {"policies": {"steering_allows_capability": True}},
    "full_coverage": {"policies": {"phase_transition": "full_coverage"}},
    "partial_credit": {"policies": {"score": "mean_score"}},
    # Meta-Harness style: every candidate on the whole train split and on dev, no phase schedule
    "full_batch": {"policies": {"sampler": "full", "dev_eval": "always", "phases": "none"}},
    "dev_never": {"policies": {"dev_eval": "never", "evolution": "continue"}},
    "greedy": {"policies": {"dev_eval": "never", "evolution": "continue", "phases": "none"}},
}
KNOBS: dict[str, str] = {  # a default chosen by issue 19 -> the strategy that differs from `full` only there
    "policies.acceptance = sequential": "strict_mean",
    "policies.phase_moves = evidence": "fixed_phases",
    "policies.sampler = curriculum": "epoch_sampler",
    "policies.dev_guard = true": "no_dev_guard",
    "policies.dev_guard_evidence = true": "dev_guard_one_pass",
    "policies.exclude_worse_on_lineage = true": "no_lineage_exclusion",
    "policies.keep_stepping_stones = true": "no_stepping_stones",
    "policies.unseen_tie_on_dev = true": "no_unseen_tie",
}
# real GEPA driven by the same proposer, without and with saddler's phases, at the default's rollouts (and, the
# `_sessions` pair, at the default's LLM sessions too: see bench/gepa_strategy.py)
GEPA = ("gepa", "gepa_phases", "gepa_sessions", "gepa_phases_sessions")
BENCHMARKS = ("opsdesk", "repofix")
PROPOSERS = ("neutral", "calibrated")
CELLS = tuple(f"{b}.{p}" for b in BENCHMARKS for p in PROPOSERS)  # every cell, in the bench's order


def overrides_of(name: str, proposer: str) -> dict[str, Any]:
    """The `[run]` settings strategy `name` runs with under the offline `proposer` (GEPA's: the proposer only)."""
    return {**STRATEGIES.get(name, {}), "sessions": {"proposer": proposer}}

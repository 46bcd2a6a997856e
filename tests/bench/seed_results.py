"""One `SeedResult` (bench/strategy_runs.py) for the bench's tests: plausible figures, any of them changed."""

from __future__ import annotations

import sys

from repo_paths import REPO

sys.path.insert(0, str(REPO / "bench"))
from strategy_runs import SeedResult


def seed_result(seed: int = 0, test: float = 0.5, **changes: object) -> SeedResult:
    """The figures of one run on `seed` whose returned node scores `test` (also its dev and the DAG's best)."""
    fields: dict[str, object] = {
        "seed": seed, "test": test, "baseline_test": 0.5, "spent": 600, "test_spent": 240, "returned_dev": test,
        "reach": 300, "charged_dev": 0, "capability_in_returned": 2, "saturated": 0, "blocked": 1, "accepted": 4,
        "rejected": 6, "ties_rejected": 0, "ties_after_evidence": 1, "good_rejected": 0, "false_accepts": 0,
        "dag_best_test": test, "kept_best_test": test, "evidence_rollouts": 50, "wall_s": 12.5,
        "origins": [("bank:tool_x", "capability")], "notes": [],
    }  # fmt: skip
    fields.update(changes)
    return SeedResult(**fields)  # type: ignore[arg-type]

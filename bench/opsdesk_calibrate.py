"""Calibrate the bundled opsdesk benchmark: baseline, every bank patch alone, and the best known combination.

See `bench/bank_calibrate.py` for how variants are built and run (each rollout in its own child process, two at
a time). Prints train/dev/test Pass@1 as mean ± std over the seeds, then the lines `opsdesk_baseline_test`,
`opsdesk_best_test`, `opsdesk_harmful_patches`, `opsdesk_rollout_median_ms`.

Usage: python bench/opsdesk_calibrate.py [--seeds 3] [--workers 2] [--only baseline,best,PATCH_ID...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: benchmarks.*

from bank_calibrate import Subject, main

from benchmarks.opsdesk import TEMPLATE_DIR, OpsdeskBenchmark
from benchmarks.opsdesk.bank import bank_metadata

if __name__ == "__main__":
    subject = Subject("opsdesk", OpsdeskBenchmark(), TEMPLATE_DIR, bank_metadata(), "benchmarks.opsdesk.runner")
    raise SystemExit(main(subject))

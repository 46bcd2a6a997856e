"""Calibrate the bundled repofix benchmark: baseline, every bank patch alone, the best known combination, each
harmful patch on top of the best (`--on-best`) and the best without each of its patches (`--marginals`).

See `bench/bank_calibrate.py` for how variants are built and run. Prints train/dev/test Pass@1 (mean ± std
over the seeds) and ends with `repofix_baseline_test`, `repofix_best_test`, `repofix_harmful_patches` and
`repofix_rollout_median_ms`.

Usage: python bench/repofix_calibrate.py [--seeds 3] [--workers 2] [--on-best] [--marginals] [--only ID,...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: benchmarks.*

from bank_calibrate import Subject, main

from benchmarks.repofix import TEMPLATE_DIR, RepofixBenchmark

if __name__ == "__main__":
    bench = RepofixBenchmark()
    subject = Subject("repofix", bench, TEMPLATE_DIR, bench.bank_metadata(), "benchmarks.repofix.runner")
    raise SystemExit(main(subject))

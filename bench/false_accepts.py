"""Which false accepts are clear? The kept candidates below their parent on test, by any amount or clearly.

Issue 19's false accept is a candidate the run kept (accepted, or kept as a stepping stone) whose post-hoc test is
below its parent's, by any amount (`strategy_runs.false_accept_pairs`, the figure `bench/strategies.py` prints as
`_false_accept_share`). The test has its own noise: 40 tasks at the run's `test_runs` seeds, where one task flipping
moves the mean by a point. This script reads finished bench runs (folders a `bench/strategies.py --out DIR` sweep
measured, e.g. `DIR/repofix/neutral/full-s3`; nothing is evaluated or written) and asks of each false accept what
the method asks of a candidate: is it lower clearly, P(better) of the candidate over its parent, paired task by task
on the post-hoc test rows (`strategy_runs.test_confidences`), at most 1 − `policies.acceptance_confidence`?

`bench/strategies.py` measures the same count for every run it makes (`_false_accept_clear_share`, a proposed bar);
this script gives it, and each pair's P(better), for finished runs, also those whose records were made before.

Prints per run `false_accepts <run>: K kept, F below the parent on test, C of them clearly (parent→candidate ...)`
then the grep-able `false_accepts_runs`, `false_accepts_kept`, `false_accept_share` (F over K, the bench's
figure) and `false_accept_clear_share` (C over K).

Usage: python bench/false_accepts.py RUN [RUN ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from strategy_runs import POSTHOC, false_accept_pairs, test_confidences

from evodag.decisions import KEPT_DECISIONS
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.policies.acceptance import clearly_worse


@dataclass(frozen=True)
class FalseAccepts:
    """One run: how many candidates it kept, and each false accept with its P(better) on test."""

    run: str
    kept: int
    below: list[tuple[int, int, float]]  # (parent, candidate, P(better) of the candidate on test)
    confidence: float  # the run's acceptance confidence: a false accept is clear when `clearly_worse` at it

    @property
    def clear(self) -> int:
        return sum(1 for _, _, p in self.below if clearly_worse(p, self.confidence))


def false_accepts(run: Path) -> FalseAccepts:
    """The false accepts of finished bench run `run` (read only), each with its paired P(better) on test."""
    if not (run / POSTHOC).is_file() or not (run / "evodag.sqlite").is_file():
        raise SystemExit(f"{run}: not a finished bench run (no {POSTHOC}): give a run bench/strategies.py measured")
    tests = {int(k): float(v) for k, v in json.loads((run / POSTHOC).read_text())["test"].items()}
    cfg = load_run_config(run)
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        iterations = store.iterations()
    pairs = false_accept_pairs(iterations, tests)
    kept = sum(1 for it in iterations if it.candidate_id is not None and it.decision in KEPT_DECISIONS)
    below = [(p, c, conf) for (p, c), conf in zip(pairs, test_confidences(run, pairs, cfg.loop.test_runs), strict=True)]
    return FalseAccepts(str(run), kept, below, cfg.policies.acceptance_confidence)


def summary(rows: list[FalseAccepts]) -> list[str]:
    """The grep-able lines over `rows`."""
    kept = sum(r.kept for r in rows)
    below, clear = sum(len(r.below) for r in rows), sum(r.clear for r in rows)
    share = (lambda n: f"{n / kept:.3f} ({n} of {kept})") if kept else (lambda n: "nan (no candidate kept)")
    return [
        f"false_accepts_runs: {len(rows)}",
        f"false_accepts_kept: {kept}",
        f"false_accept_share: {share(below)}",
        f"false_accept_clear_share: {share(clear)}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    rows = []
    for run in args.runs:
        row = false_accepts(run)
        rows.append(row)
        detail = ", ".join(f"n{p}→n{c} P(better) {conf:.2f}" for p, c, conf in row.below)
        print(f"false_accepts {run}: {row.kept} kept, {len(row.below)} below the parent on test, {row.clear} of them "
              f"clearly" + (f" ({detail})" if detail else ""), flush=True)  # fmt: skip
    for line in summary(rows):
        print(line)


if __name__ == "__main__":
    main()

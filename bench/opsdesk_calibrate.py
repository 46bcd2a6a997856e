"""Calibrate the bundled opsdesk benchmark: baseline, every bank patch alone, and the best known combination.

Each harness variant is built in a temporary git repository (a copy of `harness_templates/opsdesk/`,
committed, then `git apply --3way` of bank patches). Every rollout runs in its own child process
(`python -m benchmarks.opsdesk.runner`), two at a time, because harness code is untrusted. Prints
train/dev/test Pass@1 as mean ± std over the seeds, then the lines
`opsdesk_baseline_test`, `opsdesk_best_test`, `opsdesk_harmful_patches`, `opsdesk_rollout_median_ms`.

Usage: python bench/opsdesk_calibrate.py [--seeds 3] [--workers 2] [--only baseline,best,PATCH_ID...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.opsdesk import TEMPLATE_DIR, OpsdeskBenchmark  # noqa: E402
from benchmarks.opsdesk.bank import bank_metadata  # noqa: E402

SPLITS = ("train", "dev", "test")


def git(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "user.name=calibrate", "-c", "user.email=calibrate@localhost", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
    )


def build_variant(dest: Path, patch_ids: list[str], diffs: dict[str, str]) -> Path:
    """A git repo holding the baseline harness with `patch_ids` applied (3-way) in order."""
    shutil.copytree(TEMPLATE_DIR, dest)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "baseline")
    for pid in patch_ids:
        proc = git(dest, "apply", "--3way", "-", stdin=diffs[pid])
        if proc.returncode != 0:
            raise SystemExit(f"bank patch {pid} does not apply on {patch_ids}: {proc.stderr.strip()}")
        git(dest, "add", "-A")
        git(dest, "commit", "-qm", pid)
    return dest


def child_command() -> list[str]:
    """`python -S` when the repository itself provides every import (fast start), else plain python."""
    return [sys.executable, "-S", "-m", "benchmarks.opsdesk.runner"]


def rollout(harness: Path, task_id: str, seed: int, trace_dir: Path) -> tuple[dict[str, object], float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # keep the .pyc cache
    env["PYTHONPATH"] = str(ROOT)
    start = time.perf_counter()
    proc = subprocess.run(
        [*child_command(), str(harness), task_id, str(seed), "--trace-dir", str(trace_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"runner crashed on {task_id}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout), elapsed


def evaluate(
    harness: Path,
    tasks: list[tuple[str, str, str]],
    seeds: int,
    pool: ThreadPoolExecutor,
    trace_root: Path,
    times: list[float],
) -> dict[str, dict[int, list[bool]]]:
    """{split or group: {seed: [passed...]}} for every task × seed."""
    jobs = [(tid, split, group, seed) for tid, split, group in tasks for seed in range(seeds)]
    futures = [pool.submit(rollout, harness, tid, seed, trace_root) for tid, _, _, seed in jobs]
    out: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for (_tid, split, group, seed), fut in zip(jobs, futures, strict=True):
        result, elapsed = fut.result()
        times.append(elapsed)
        out[split][seed].append(bool(result["passed"]))
        out[group][seed].append(bool(result["passed"]))
    return out


def mean_std(per_seed: dict[int, list[bool]]) -> tuple[float, float]:
    rates = [sum(v) / len(v) for _, v in sorted(per_seed.items())]
    return statistics.fmean(rates), statistics.pstdev(rates) if len(rates) > 1 else 0.0


def overall(per_seed: dict[int, list[bool]]) -> float:
    values = [x for v in per_seed.values() for x in v]
    return sum(values) / len(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated variants: baseline, best, patch ids")
    args = parser.parse_args()
    bench = OpsdeskBenchmark()
    bank = {p.id: p for p in bench.patch_bank()}
    meta = {p["id"]: p for p in bank_metadata()["patches"]}
    best = list(bank_metadata()["best_combination"])
    variants: list[tuple[str, list[str]]] = [("baseline", []), *((pid, [pid]) for pid in bank), ("best", best)]
    if args.only:
        wanted = set(args.only.split(","))
        variants = [v for v in variants if v[0] in wanted or v[0] == "baseline"]
    tasks = [(t.id, split, t.group) for split in SPLITS for t in bench.tasks(split)]
    diffs = {pid: p.diff for pid, p in bank.items()}
    times: list[float] = []
    results: dict[str, dict[str, dict[int, list[bool]]]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opsdesk-calibrate-") as tmp, ThreadPoolExecutor(args.workers) as pool:
        for name, ids in variants:
            harness = build_variant(Path(tmp) / name, ids, diffs)
            results[name] = evaluate(harness, tasks, args.seeds, pool, Path(tmp) / "traces" / name, times)
    wall = time.perf_counter() - started
    base = results["baseline"]
    print(
        f"opsdesk calibration: {len(tasks)} tasks x {args.seeds} seeds, {len(times)} rollouts in {wall:.0f}s "
        f"({args.workers} parallel child processes)"
    )
    print(
        f"{'variant':24s} {'effect':15s} "
        + " ".join(f"{s + ' Pass@1':>16s}" for s in SPLITS)
        + "   Δtrain  Δdev   Δtest  harmful"
    )
    harmful = 0
    for name, _ids in variants:
        res = results[name]
        cells = " ".join(f"{m:7.3f} ± {s:5.3f} " for m, s in (mean_std(res[sp]) for sp in SPLITS))
        deltas = [overall(res[sp]) - overall(base[sp]) for sp in SPLITS]
        groups = [g for g in res if g not in SPLITS]
        up_train = [
            g
            for g in groups
            if g in {t[2] for t in tasks if t[1] == "train"} and overall(res[g]) > overall(base[g]) + 1e-9
        ]
        is_harmful = name in bank and bool(up_train) and (deltas[1] < -1e-9 or deltas[2] < -1e-9)
        harmful += is_harmful
        effect = meta[name]["effect"] if name in meta else ""
        print(
            f"{name:24s} {effect:15s} {cells} {deltas[0]:+.3f} {deltas[1]:+.3f} {deltas[2]:+.3f}  "
            f"{'yes (raises ' + ','.join(up_train) + ')' if is_harmful else ''}"
        )
    print("baseline per group: " + ", ".join(f"{g} {overall(v):.2f}" for g, v in base.items() if g not in SPLITS))
    if "best" in results:
        print(
            "best per group:     "
            + ", ".join(f"{g} {overall(v):.2f}" for g, v in results["best"].items() if g not in SPLITS)
        )
    ms = sorted(t * 1000 for t in times)
    print(
        f"child wall per rollout: median {statistics.median(ms):.1f} ms, p90 {ms[int(len(ms) * 0.9)]:.1f} ms; "
        f"amortised {wall * 1000 / len(times):.1f} ms/rollout with {args.workers} workers"
    )
    print(f"opsdesk_baseline_test: {overall(base['test']):.3f}")
    print(f"opsdesk_best_test: {overall(results['best']['test']) if 'best' in results else float('nan'):.3f}")
    print(f"opsdesk_harmful_patches: {harmful}")
    print(f"opsdesk_rollout_median_ms: {statistics.median(ms) / args.workers:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

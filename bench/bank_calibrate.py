"""Calibrate a bundled simulated benchmark (opsdesk, repofix): the baseline, every bank patch alone, the best
known combination, and optionally patches on top of the best combination or left out of it.

Each harness variant is built in a temporary git repository (a copy of the benchmark's template, committed, then
`git apply --3way` of bank patches). Every rollout runs in its own child process (`python -m <package>.runner`),
`--workers` at a time, because harness code is untrusted (`--in-process` runs them in this process instead: the
same results, much faster on a loaded machine, and no `_rollout_median_ms` line). Prints train/dev/test Pass@1
as mean ± std over the seeds, then the grep-able lines `<name>_baseline_test`, `<name>_best_test`,
`<name>_harmful_patches`, `<name>_rollout_median_ms`. A patch counts as harmful when it raises at least one
train group and lowers dev or test by more than one rollout (a single flip is noise), alone against the baseline
or (with `--on-best`) on top of the best combination against it.
`bench/opsdesk_calibrate.py` and `bench/repofix_calibrate.py` call `main` with their benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPLITS = ("train", "dev", "test")
Results = dict[str, dict[int, list[bool]]]  # split or group -> seed -> passed per task


@dataclass(frozen=True)
class Subject:
    """What is calibrated: a benchmark instance, its template, its bank metadata and its runner module."""

    name: str
    bench: Any
    template: Path
    metadata: dict[str, Any]
    runner: str


def git(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "user.name=calibrate", "-c", "user.email=calibrate@localhost", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
    )


def build_variant(template: Path, dest: Path, patch_ids: list[str], diffs: dict[str, str]) -> Path:
    """A git repo holding the baseline harness with `patch_ids` applied (3-way) in order."""
    shutil.copytree(template, dest)
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


def rollout(runner: str, harness: Path, task_id: str, seed: int, trace_dir: Path) -> tuple[dict[str, Any], float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # keep the .pyc cache
    env["PYTHONPATH"] = str(ROOT)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-S", "-m", runner, str(harness), task_id, str(seed), "--trace-dir", str(trace_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"runner crashed on {task_id}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout), elapsed


def rollout_in_process(
    subject: Subject, harness: Path, task: Any, seed: int, trace_dir: Path
) -> tuple[dict[str, Any], float]:
    """The same rollout in this process (no isolation: for bank patches only, whose code is known)."""
    start = time.perf_counter()
    result = subject.bench.run(harness, task, seed, trace_dir).to_dict()
    return result, time.perf_counter() - start


def evaluate(
    subject: Subject,
    harness: Path,
    tasks: list[tuple[str, str, str]],
    seeds: int,
    pool: ThreadPoolExecutor | None,
    trace_root: Path,
    times: list[float],
) -> Results:
    """{split or group: {seed: [passed...]}} for every task × seed (in this process when `pool` is None)."""
    jobs = [(tid, split, group, seed) for tid, split, group in tasks for seed in range(seeds)]
    if pool is None:
        by_id = {t.id: t for split in SPLITS for t in subject.bench.tasks(split)}
        done = [rollout_in_process(subject, harness, by_id[tid], seed, trace_root) for tid, _, _, seed in jobs]
        return _collect(jobs, done, times)
    futures = [pool.submit(rollout, subject.runner, harness, tid, seed, trace_root) for tid, _, _, seed in jobs]
    return _collect(jobs, [f.result() for f in futures], times)


def _collect(
    jobs: list[tuple[str, str, str, int]], done: list[tuple[dict[str, Any], float]], times: list[float]
) -> Results:
    out: Results = defaultdict(lambda: defaultdict(list))
    for (_tid, split, group, seed), (result, elapsed) in zip(jobs, done, strict=True):
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


def one_rollout(per_seed: dict[int, list[bool]]) -> float:
    """What one rollout flipping moves `overall` by: the noise floor a difference must clear."""
    return 1.0 / sum(len(v) for v in per_seed.values()) + 1e-9


def variants(subject: Subject, on_best: bool, marginals: bool) -> list[tuple[str, list[str], str]]:
    """(label, patch ids, the label it is compared with): the baseline, each patch, the best combination, and
    with `on_best` each harmful patch added to the best (in place of its conflict partner), with `marginals`
    the best without each of its patches."""
    meta = {p["id"]: p for p in subject.metadata["patches"]}
    best = list(subject.metadata["best_combination"])
    out = [("baseline", [], ""), *((pid, [pid], "baseline") for pid in meta), ("best", best, "baseline")]
    if on_best:
        for pid, p in meta.items():
            if p["effect"] == "harmful":
                out.append((f"best+{pid}", [i for i in best if i not in p["conflicts_with"]] + [pid], "best"))
    if marginals:
        out += [(f"best-{pid}", [i for i in best if i != pid], "best") for pid in best]
    return out


def main(subject: Subject, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Calibrate {subject.name}: baseline, each bank patch, best")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated variants: baseline, best, patch ids")
    parser.add_argument("--on-best", action="store_true", help="also each harmful patch on top of the best")
    parser.add_argument("--marginals", action="store_true", help="also the best without each of its patches")
    parser.add_argument(
        "--in-process", action="store_true", help="run rollouts in this process (same results; no timing line)"
    )
    args = parser.parse_args(argv)
    bank = {p.id: p for p in subject.bench.patch_bank()}
    meta = {p["id"]: p for p in subject.metadata["patches"]}
    chosen = variants(subject, args.on_best, args.marginals)
    if args.only:
        wanted = set(args.only.split(","))
        chosen = [v for v in chosen if v[0] in wanted or v[0] in ("baseline", "best")]
    tasks = [(t.id, split, t.group) for split in SPLITS for t in subject.bench.tasks(split)]
    diffs = {pid: p.diff for pid, p in bank.items()}
    times: list[float] = []
    results: dict[str, Results] = {}
    started = time.perf_counter()
    child_cpu = 0.0  # user + sys of the rollout children (not of git)
    prefix = f"{subject.name}-calibrate-"
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, ThreadPoolExecutor(args.workers) as workers:
        pool = None if args.in_process else workers
        for label, ids, _ in chosen:
            harness = build_variant(subject.template, Path(tmp) / label, ids, diffs)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            results[label] = evaluate(subject, harness, tasks, args.seeds, pool, Path(tmp) / "traces" / label, times)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            child_cpu += after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    wall = time.perf_counter() - started
    how = "in this process" if args.in_process else f"{args.workers} parallel child processes"
    size = f"{len(tasks)} tasks x {args.seeds} seeds, {len(times)} rollouts"
    print(f"{subject.name} calibration: {size} in {wall:.0f}s ({how})")
    print(
        f"{'variant':34s} {'effect':15s} "
        + " ".join(f"{s + ' Pass@1':>16s}" for s in SPLITS)
        + "   Δtrain  Δdev   Δtest  harmful"
    )
    train_groups = {t[2] for t in tasks if t[1] == "train"}
    harmful: set[str] = set()
    for label, _ids, versus in chosen:
        res = results[label]
        cells = " ".join(f"{m:7.3f} ± {s:5.3f} " for m, s in (mean_std(res[sp]) for sp in SPLITS))
        if not versus:
            print(f"{label:34s} {'':15s} {cells}")
            continue
        ref = results[versus]
        deltas = [overall(res[sp]) - overall(ref[sp]) for sp in SPLITS]
        up_train = [g for g in sorted(train_groups) if overall(res[g]) > overall(ref[g]) + 1e-9]
        pid = label.removeprefix("best+")
        lower = any(-deltas[i] > one_rollout(res[SPLITS[i]]) for i in (1, 2))
        is_harmful = pid in bank and bool(up_train) and lower
        if is_harmful and not label.startswith("best-"):
            harmful.add(pid)
        effect = meta[pid]["effect"] if pid in meta and not label.startswith("best-") else "vs best"
        verdict = f"yes (raises {','.join(up_train)})" if is_harmful else ""
        print(f"{label:34s} {effect:15s} {cells} {deltas[0]:+.3f} {deltas[1]:+.3f} {deltas[2]:+.3f}  {verdict}")
    for label in ("baseline", "best"):
        if label in results:
            groups = ", ".join(f"{g} {overall(v):.2f}" for g, v in results[label].items() if g not in SPLITS)
            print(f"{label} per group: {groups}")
    ms = sorted(t * 1000 for t in times)
    where = "in process" if args.in_process else "child wall"
    print(
        f"{where} per rollout: median {statistics.median(ms):.1f} ms, p90 {ms[int(len(ms) * 0.9)]:.1f} ms; "
        f"amortised {wall * 1000 / len(times):.1f} ms/rollout; load average {os.getloadavg()[0]:.1f}"
    )
    if not args.in_process:
        print(f"child cpu per rollout (user + sys, whatever the load): mean {child_cpu * 1000 / len(times):.1f} ms")
    best_test = overall(results["best"]["test"]) if "best" in results else float("nan")
    print(f"{subject.name}_baseline_test: {overall(results['baseline']['test']):.3f}")
    print(f"{subject.name}_best_test: {best_test:.3f}")
    print(f"{subject.name}_harmful_patches: {len(harmful)}")
    if not args.in_process:  # the figure is a child process's cost: Python start, imports, the rollout
        print(f"{subject.name}_rollout_median_ms: {statistics.median(ms) / args.workers:.1f}")
    return 0

"""Wall time of a run on a simulated clock: the default pipeline against the serial loop, on the same seeds.

Each run is a real offline run (opsdesk or repofix, the offline backend with the `--proposer`) whose events follow
a virtual clock (`saddler.schedule`): every session and rollout takes the time a seeded latency model draws for it,
`--sandboxes` rollouts run at once, and nothing sleeps. The same seed, config and model give the same DAG, so two
variants on one seed differ only in how they schedule and decide. Variants:

- `serial`: the loop before the scheduler (`Pipeline.serial()`: one iteration at a time, every evaluation a
  barrier, no dev race): today's serial loop, timed;
- `default`: saddler's defaults as a user gets them;
- `k<N>` (e.g. `k4`), `k<N>_race`, `k<N>_norace`: the default with `loop.parallel_iterations = N`, and the dev race
  forced on or off; `_free` lets diagnoses start in any order (`Pipeline.diagnoses_in_order` off): what the
  default was chosen from.

Scenarios (medians; rollouts lognormal with sigma 1, sessions sigma 0.5; `saddler.schedule.latency`):

- `api_fast`: `saddler.schedule.latency.ASSUMED` — diagnosis 120 s, reflection and evolution 20 s, a rollout 60 s:
  an API-calling task agent, as issue 51 measured a run with injected latencies;
- `terminal`: diagnosis 300 s, reflection and evolution 60 s, a rollout 600 s: terminal tasks (issue 51's second
  scenario, Terminal-Bench-like trials that run for minutes).

Grep-able lines per scenario and variant (means over the seeds; `_test_delta` paired by seed, ± its standard
error; ratios are the variant's over the serial loop's on the same seed, averaged):

  wallclock_<scenario>_<variant>_wall_h, _search_h (to the end of the search), _test, _rollouts, _sessions,
  _sandbox_busy_share (sandbox-seconds used over those available until the search ended)
  wallclock_<scenario>_<variant>_time_to_serial_final_dev_ratio: virtual time until the variant's best node first
      reaches the serial run's final best dev, over the serial run's whole wall time (a seed never reaching it
      counts its whole wall time; `_never_reached` counts those seeds)
  wallclock_<scenario>_<variant>_test_delta, _rollouts_ratio, _sessions_ratio, _wall_ratio, and per benchmark
      `_<benchmark>_test_delta`, `_<benchmark>_rollouts_ratio`
  wallclock_<scenario>_<variant>_time_to_within_one_dev_task_ratio: the same as the time to the serial final dev,
      to one dev task below it (the bar the bench proposes: a final dev one task apart is inside dev's noise, and a
      seed that ends there is counted at its whole wall time by the first ratio); `_never_within_one_dev_task`
  wallclock_<scenario>_time_to_serial_final_dev_ratio, _test_delta, _rollouts_ratio, _sessions_ratio: the
      `default` variant's (the issue's bars)
  wallclock_deterministic: true when one seed of the default, run twice, gives the same DAG and the same clock

Usage: python bench/wallclock.py [--benchmarks opsdesk,repofix] [--proposer calibrated]
       [--scenarios api_fast,terminal] [--variants serial,default] [--first-seed 0] [--seeds 10] [--sandboxes 32]
       [--iterations 30] [--jobs 2] [--out DIR] [--reuse]
--reuse measures the finished runs of an earlier --out again (nothing runs twice).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import math
import multiprocessing
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from saddler.procs import die_with_parent
from saddler.run.pipeline import SEARCH_EVENT
from saddler.schedule import ASSUMED, LatencyModel, Pipeline, Schedule

SCENARIOS: dict[str, LatencyModel] = {
    "api_fast": ASSUMED,
    "terminal": LatencyModel("terminal", diagnosis_patch_s=300.0, reflection_s=60.0, evolution_s=60.0, rollout_s=600.0),
}
BARS = {"time_to_serial_final_dev_ratio": 0.25, "rollouts_ratio": 1.1, "sessions_ratio": 1.2}


def variant_settings(name: str) -> tuple[Pipeline | None, dict[str, Any]]:
    """The pipeline (None: the run's own, from its config) and `[run]` overrides of variant `name`."""
    if name == "serial":
        return Pipeline.serial(), {"loop": {"parallel_iterations": 1}, "policies": {"dev_race": False}}
    if name == "default":
        return None, {}
    found = re.fullmatch(r"k(\d+)((?:_race|_norace|_free)*)", name)
    if not found:
        raise ValueError(f"unknown variant {name!r}: serial, default, k<N>[_race|_norace][_free]")
    overrides: dict[str, Any] = {"loop": {"parallel_iterations": int(found[1])}}
    flags = found[2].split("_")
    if "race" in flags or "norace" in flags:
        overrides["policies"] = {"dev_race": "race" in flags}
    pipeline = Pipeline(iterations=int(found[1]), diagnoses_in_order="free" not in flags)
    return pipeline, overrides


@dataclass
class Measured:
    """One run's figures (seconds on the virtual clock)."""

    wall_s: float
    search_s: float
    best_over_time: list[tuple[float, float]]  # (seconds, the best node's dev) each time the best changed
    best_dev: float
    test: float
    rollouts: int
    sessions: int
    busy_share: float
    signature: str
    dev_size: int = 40  # the dev split's tasks: one task is 1 / this of a dev mean
    real_s: float = 0.0


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def measure(run_dir: Path) -> Measured:
    """The figures of a finished simulated run, from its store alone."""
    with sqlite3.connect(run_dir / "evodag.sqlite") as db:
        started = _seconds(db.execute("select started_at from runs").fetchone()[0])
        last = _seconds(db.execute("select max(ts) from events").fetchone()[0])
        search_end = db.execute(f"select max(ts) from events where kind = '{SEARCH_EVENT}'").fetchone()[0]
        best_ids = [
            (json.loads(p).get("best_node_id"), _seconds(ts))
            for ts, p in db.execute("select ts, payload from events where kind = 'run.updated' order by id")
            if "best_node_id" in json.loads(p)
        ]
        dev = dict(db.execute("select id, dev_mean from nodes"))
        run = db.execute("select best_node_id from runs").fetchone()[0]
        test = db.execute("select test_mean from nodes where id = ?", (run,)).fetchone()[0]
        rollouts = db.execute("select count(*) from rollouts").fetchone()[0]
        sessions = db.execute("select count(*) from sessions").fetchone()[0]
        busy = _busy(db)
        signature = _signature(db)
        base = db.execute("select baseline_node_id from runs").fetchone()[0]
        dev_size = db.execute("select count(*) from rollouts where node_id = ? and split = 'dev'", (base,)).fetchone()[
            0
        ]
    search_s = (_seconds(search_end) if search_end else last) - started
    trajectory = [(when - started, float(dev[nid] or 0.0)) for nid, when in best_ids if nid in dev]
    best_dev = float(dev[run] or 0.0)
    return Measured(last - started, search_s, trajectory, best_dev, float(test or 0.0), rollouts, sessions, busy,
                    signature, dev_size or 40)  # fmt: skip


def _busy(db: sqlite3.Connection) -> float:
    """Sandbox-seconds used over those available until the search ended (the run's `schedule.search_ended`)."""
    found = db.execute(f"select payload from events where kind = '{SEARCH_EVENT}' order by id desc").fetchone()
    if found is None:
        return 0.0
    pool = json.loads(found[0])
    span = float(pool["seconds"]) * int(pool["sandboxes"])
    return float(pool["busy_seconds"]) / span if span > 0 else 0.0


def _signature(db: sqlite3.Connection) -> str:
    """A digest of the DAG and its clock: nodes, edges, iterations, rollouts and sessions, timestamps included."""
    digest = hashlib.sha256()
    queries = (
        'select id, "commit", parent_id, iteration, status, origin, dev_mean, dev_tasks, test_mean, created_at '
        "from nodes order by id",
        "select id, parent_id, child_id, kind, diff_sha, fixed, regressed, created_at from edges order by id",
        "select number, batch, parent_id, candidate_id, decision, finish_order, started_at, finished_at "
        "from iterations order by id",
        "select id, node_id, task_id, split, seed, repetition, score, passed, created_at from rollouts order by id",
        "select iteration, role, attempt, outcome, created_at from sessions order by id",
    )
    for query in queries:
        for row in db.execute(query):
            digest.update(repr(row).encode())
    return digest.hexdigest()[:16]


def run_seed(args: tuple[Any, ...]) -> tuple[str, str, str, int, dict[str, Any]]:
    """Run one variant on one seed of one benchmark under one scenario (in a worker process)."""
    bench, proposer, scenario, variant, seed, iterations, sandboxes, run_dir, reuse = args
    saved = run_dir / "wallclock.json"
    if reuse and saved.exists():  # measured again from the store; the real seconds of the run that made it
        figures = measure(run_dir)
        figures.real_s = float(json.loads(saved.read_text()).get("real_s", 0.0))
        return bench, scenario, variant, seed, asdict(figures)
    import inprocess

    from saddler.run.folder import init_run
    from saddler.run.loop import Optimizer

    inprocess.install()
    pipeline, overrides = variant_settings(variant)
    sets: dict[str, Any] = {
        "loop": {"max_iterations": iterations},
        "executor": {"workers": sandboxes},
        "sessions": {"proposer": proposer},
    }
    for key, table in overrides.items():
        sets.setdefault(key, {}).update(table)
    started = time.monotonic()
    init_run(run_dir, template=bench, seed=seed, force=True, overrides=sets)
    model = SCENARIOS[scenario]
    optimizer = Optimizer(run_dir, quiet=True, schedule=Schedule.simulation(model), pipeline=pipeline)
    optimizer.run()
    figures = measure(run_dir)
    figures.real_s = time.monotonic() - started
    saved.write_text(json.dumps({"real_s": figures.real_s}))
    return bench, scenario, variant, seed, asdict(figures)


def first_reach(trajectory: list[tuple[float, float]], target: float, wall: float) -> tuple[float, bool]:
    """When the best node first reached `target` dev (`wall` and False when it never did)."""
    for when, dev in trajectory:
        if dev >= target - 1e-9:
            return when, True
    return wall, False


def mean_se(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return statistics.fmean(values), se


def report(results: dict[tuple[str, str, str, int], dict[str, Any]], scenarios: list[str], variants: list[str]) -> None:
    """The grep-able lines (see the module docstring)."""
    for scenario in scenarios:
        serial = {(b, s): r for (b, sc, v, s), r in results.items() if sc == scenario and v == "serial"}
        for variant in variants:
            mine = {(b, s): r for (b, sc, v, s), r in results.items() if sc == scenario and v == variant}
            if not mine:
                continue
            key = f"wallclock_{scenario}_{variant}"
            for name, field in (("wall_h", "wall_s"), ("search_h", "search_s")):
                print(f"{key}_{name}: {statistics.fmean(r[field] for r in mine.values()) / 3600:.2f}")
            for name in ("test", "rollouts", "sessions", "best_dev"):
                print(f"{key}_{name}: {statistics.fmean(r[name] for r in mine.values()):.4g}")
            print(f"{key}_sandbox_busy_share: {statistics.fmean(r['busy_share'] for r in mine.values()):.3f}")
            print(f"{key}_real_s: {statistics.fmean(r['real_s'] for r in mine.values()):.1f}")
            paired = [(mine[k], serial[k]) for k in sorted(mine) if k in serial]
            if variant == "serial" or not paired:
                continue
            reach = [first_reach(m["best_over_time"], s["best_dev"], m["wall_s"]) for m, s in paired]
            near = [first_reach(m["best_over_time"], s["best_dev"] - 1 / s["dev_size"], m["wall_s"]) for m, s in paired]
            ratios = {
                "time_to_serial_final_dev_ratio": [
                    when / s["wall_s"] for (when, _), (_m, s) in zip(reach, paired, strict=True)
                ],
                "time_to_within_one_dev_task_ratio": [
                    when / s["wall_s"] for (when, _), (_m, s) in zip(near, paired, strict=True)
                ],
                "rollouts_ratio": [m["rollouts"] / s["rollouts"] for m, s in paired],
                "sessions_ratio": [m["sessions"] / max(1, s["sessions"]) for m, s in paired],
                "wall_ratio": [m["wall_s"] / s["wall_s"] for m, s in paired],
            }
            lines = {name: f"{statistics.fmean(v):.3f}" for name, v in ratios.items()}
            delta, se = mean_se([m["test"] - s["test"] for m, s in paired])
            lines["test_delta"] = f"{delta:+.4f} +- {se:.4f}"
            lines["never_reached"] = str(sum(1 for _, ok in reach if not ok))
            lines["never_within_one_dev_task"] = str(sum(1 for _, ok in near if not ok))
            for bench in sorted({b for b, _ in mine}):
                pairs = [(mine[k], serial[k]) for k in sorted(mine) if k in serial and k[0] == bench]
                d, e = mean_se([m["test"] - s["test"] for m, s in pairs])
                lines[f"{bench}_test_delta"] = f"{d:+.4f} +- {e:.4f}"
                lines[f"{bench}_rollouts_ratio"] = (
                    f"{statistics.fmean(m['rollouts'] / s['rollouts'] for m, s in pairs):.3f}"
                )
            for name, text in lines.items():
                print(f"{key}_{name}: {text}")
            if variant == "default":
                for name, text in lines.items():
                    print(f"wallclock_{scenario}_{name}: {text}")
                for name, bar in BARS.items():
                    ok = statistics.fmean(ratios[name]) <= bar
                    print(f"check_{scenario}_{name}: {'met' if ok else 'missed'} (bar {bar})")
                print(f"check_{scenario}_test_delta: {'met' if delta >= -se else 'missed'} (bar: >= -1 s.e.)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--benchmarks", default="opsdesk,repofix")
    parser.add_argument("--proposer", default="calibrated")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--variants", default="serial,default")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--sandboxes", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-determinism", action="store_true", help="skip the run that checks determinism")
    parser.add_argument("--reuse", action="store_true", help="measure the finished runs already in --out again")
    args = parser.parse_args()
    benches = [b for b in args.benchmarks.split(",") if b]
    scenarios = [s for s in args.scenarios.split(",") if s]
    variants = [v for v in args.variants.split(",") if v]
    for name in variants:
        variant_settings(name)  # unknown names fail before anything runs
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    out = args.out or Path(tempfile.mkdtemp(prefix="saddler-wallclock-"))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [
        (b, args.proposer, sc, v, s, args.iterations, args.sandboxes, out / f"{b}-{sc}-{v}-s{s}", args.reuse)
        for b in benches for sc in scenarios for v in variants for s in seeds
    ]  # fmt: skip
    if not args.no_determinism:  # the default on one seed, twice, beside the sweep
        first = (benches[0], args.proposer, scenarios[0], "default", seeds[0], args.iterations, args.sandboxes)
        jobs += [(*first, out / "determinism-a", False), (*first, out / "determinism-b", False)]
    started = time.monotonic()
    results: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    twice: list[str] = []
    context = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=context, initializer=die_with_parent) as pool:
        futures = {pool.submit(run_seed, job): job for job in jobs}
        for future in cf.as_completed(futures):
            bench, scenario, variant, seed, figures = future.result()
            if futures[future][-2].name.startswith("determinism-"):
                twice.append(figures["signature"])
                continue
            results[(bench, scenario, variant, seed)] = figures
            print(f"# {bench} {scenario} {variant} seed {seed}: wall {figures['wall_s'] / 3600:.2f} h, test "
                  f"{figures['test']:.3f}, dev {figures['best_dev']:.3f}, rollouts {figures['rollouts']}, sessions "
                  f"{figures['sessions']} ({figures['real_s']:.0f} s real)", flush=True)  # fmt: skip
    report(results, scenarios, variants)
    if twice:
        print(f"wallclock_deterministic: {'true' if len(twice) == 2 and twice[0] == twice[1] else 'false'}")
    print(f"# {len(jobs)} runs in {time.monotonic() - started:.0f} s of real time; runs in {out}")


if __name__ == "__main__":
    main()

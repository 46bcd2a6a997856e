"""Orchestration overhead of the demo run, measured in one run.

    python bench/overhead.py [--template opsdesk] [--keep DIR] [--set KEY=VALUE ...]

Runs `saddler init DIR --template opsdesk --force` then `saddler run DIR` once, the run in a child interpreter
that counts, without changing what runs:

- rollout time: wall time while some `Executor.run` call runs (the isolated rollouts, their fork servers and the
  per-rollout isolation set-up; everything the executor does; the scheduler's pool runs calls side by side, and
  their overlap is counted once),
- git: every `git` subprocess started through `subprocess.run` (count and seconds), and the long-lived ones
  (`saddler.harness.gitbatch`, counted as they start; their requests are in the time of their callers),
- SQLite: time inside the public `EvoDAG` methods (outermost calls only), split by whether it overlapped the
  rollouts (a rollout's row is stored the moment it lands, while the other workers keep running).

Prints `overhead_fraction: <x>` = (wall − rollout time) ÷ wall, where wall is the `saddler run` process from
start to exit (interpreter start-up and imports included), then `wall_s`, `rollout_s`, `git_calls`, `git_s`,
`sqlite_s` (outside rollouts), `startup_s`, `breakdown: <part>=<s> ...` (the non-rollout seconds of the main parts
of a run, each with the rollouts it waited for taken out; nested parts are also in their parents) and the demo's
summary lines (`summary: ...`), which must not change when orchestration gets cheaper. Work the orchestrator does
beside the rollouts (storing each rollout as it lands) is outside the fraction's numerator; where the rollouts
already keep every core busy it slows them instead, so compare `wall_s` as well. Before measuring it writes the
packages' bytecode (`bytecode:` line), as the demo's `pip install .` does. The isolation is whatever the run's
config says (the default unless `--set`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SUMMARY_KEYS = (
    "termination", "best_node", "best_dev", "baseline_test", "baseline_test_std", "best_test", "best_test_std",
    "delta_test", "rollouts",
)  # fmt: skip


class Counters:
    """Thread-safe accumulators the probe fills in."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[str, float] = {}
        self.depth = threading.local()

    def add(self, key: str, value: float) -> None:
        with self.lock:
            self.values[key] = self.values.get(key, 0.0) + value


def _probe(run_dir: str, out: str, started: float) -> int:
    """Child side: instrument, run `saddler run run_dir`, write the counters as JSON to `out`."""
    counters = Counters()
    in_rollouts = threading.Event()
    real_run = subprocess.run

    def counted_run(*args: Any, **kwargs: Any) -> Any:
        argv = args[0] if args else kwargs.get("args")
        if not (isinstance(argv, (list, tuple)) and argv and argv[0] == "git"):
            return real_run(*args, **kwargs)
        start = time.perf_counter()
        try:
            return real_run(*args, **kwargs)
        finally:
            counters.add("git_calls", 1)
            counters.add("git_s", time.perf_counter() - start)
            sub = next((a for a in argv[1:] if not a.startswith("-")), "?")
            counters.add(f"git:{sub}", 1)

    subprocess.run = counted_run
    from saddler.harness import gitcmd

    real_pipe = gitcmd.git_pipe

    def counted_pipe(args: Any, *rest: Any, **kwargs: Any) -> Any:
        counters.add("git_long_lived", 1)
        return real_pipe(args, *rest, **kwargs)

    gitcmd.git_pipe = counted_pipe

    from evodag.store import EvoDAG
    from saddler.executor.local import LocalExecutor

    def timed_store_method(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(counters.depth, "n", 0)
            if depth:
                return fn(*args, **kwargs)
            counters.depth.n = 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                counters.depth.n = 0
                spent = time.perf_counter() - start
                counters.add("sqlite_in_rollouts_s" if in_rollouts.is_set() else "sqlite_s", spent)
                counters.add("sqlite_calls", 1)
                if not in_rollouts.is_set():
                    counters.add(f"store:{fn.__name__}", spent)

        return wrapper

    for cls in EvoDAG.__mro__:
        for name, attr in list(vars(cls).items()):
            if name.startswith("_") or not callable(attr) or name in ("transaction", "close"):
                continue
            if isinstance(attr, (staticmethod, classmethod, property)):
                continue
            if getattr(EvoDAG, name) is attr:
                setattr(EvoDAG, name, timed_store_method(attr))

    real_executor_run = LocalExecutor.run

    active = [0, 0.0]  # executor calls running now (the scheduler's pool runs several at once), since when

    def timed_executor_run(self: Any, jobs: Any, on_result: Any) -> None:
        with counters.lock:
            if active[0] == 0:
                active[1] = time.perf_counter()
                in_rollouts.set()
            active[0] += 1
        try:
            real_executor_run(self, jobs, on_result)
        finally:
            with counters.lock:
                active[0] -= 1
                ended = active[0] == 0
                since = active[1]
            if ended:  # rollout time is the wall time some rollout ran, not the sum over calls running together
                in_rollouts.clear()
                counters.add("rollout_s", time.perf_counter() - since)
            counters.add("executor_batches", 1)
            counters.add("executor_jobs", len(jobs))

    LocalExecutor.run = timed_executor_run  # type: ignore[method-assign]
    _time_parts(counters)

    from saddler.cli.app import app

    imported = time.time()
    code = 0
    try:
        app(["run", run_dir], standalone_mode=False)
    except SystemExit as exc:
        code = int(exc.code or 0)
    values = dict(counters.values)
    values["startup_s"] = imported - started
    Path(out).write_text(json.dumps(values), encoding="utf-8")
    return code


PARTS = (  # (module, attribute path, label): the parts of a run `breakdown` reports
    ("saddler.run.loop", "open_context", "open_context"),
    ("saddler.run.loop", "finish_run", "finish_run"),
    ("saddler.run.evaluate", "Evaluator.evaluate", "evaluate"),
    ("saddler.sessions.offline", "OfflineBackend.diagnose_patch", "session.diagnose"),
    ("saddler.sessions.offline", "OfflineBackend.reflect", "session.reflect"),
    ("saddler.sessions.offline", "OfflineBackend.evolve", "session.evolve"),
    ("saddler.harness.space", "HarnessSpace.worktree", "git.worktree"),
    ("saddler.harness.space", "HarnessSpace.remove_worktree", "git.remove_worktree"),
    ("saddler.harness.space", "HarnessSpace.commit_worktree", "git.commit"),
    ("saddler.harness.space", "HarnessSpace.snapshot", "git.snapshot"),
    ("saddler.harness.space", "HarnessSpace.prune", "git.prune"),
    ("saddler.harness.export", "export_harness", "export"),
    ("saddler.reporting.figures", "write_report", "report"),
    ("saddler.reporting.plot", "plot_progress", "plot"),
    ("saddler.reporting.results_tsv", "write_results_tsv", "results_tsv"),
)


def _time_parts(counters: Counters) -> None:
    """Wrap each of `PARTS` (where it exists) to add its wall time, less the rollouts run meanwhile, to `part:`."""
    import importlib

    for module_name, path, label in PARTS:
        try:
            owner: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent, None)
        fn = getattr(owner, name, None) if owner is not None else None
        if fn is None:
            continue

        def wrapper(*args: Any, _fn: Any = fn, _label: str = label, **kwargs: Any) -> Any:
            start, rollouts = time.perf_counter(), counters.values.get("rollout_s", 0.0)
            try:
                return _fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start - (counters.values.get("rollout_s", 0.0) - rollouts)
                counters.add(f"part:{_label}", spent)

        setattr(owner, name, functools.wraps(fn)(wrapper))


def _summary(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        key = line.split(":", 1)[0].strip()
        if key in SUMMARY_KEYS:
            lines.append(line.strip())
    return lines


def _cache_bytecode() -> str:
    """Write the packages' .pyc files first, as `pip install .` (the README's demo) does: an editable install under
    PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module from source at each start, a cost of this
    checkout, not of the orchestration (a user's install reads cached bytecode)."""
    import compileall
    import importlib.util

    done = []
    for name in ("saddler", "evodag", "benchmarks"):
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            if compileall.compile_dir(folder, quiet=1):
                done.append(name)
    return f"cached for {', '.join(done)} (as pip install does)" if done else "not cached"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", default="opsdesk")
    parser.add_argument("--keep", help="run folder to use and keep (default: a temporary folder, removed)")
    parser.add_argument("--set", action="append", default=[], help="extra `saddler init --set KEY=VALUE`")
    parser.add_argument("--probe", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        return _probe(args.probe[0], args.probe[1], float(args.probe[2]))

    print(f"bytecode: {_cache_bytecode()}")
    work = Path(tempfile.mkdtemp(prefix="saddler-bench-overhead-"))
    run_dir = Path(args.keep).resolve() if args.keep else work / "demo"
    try:
        init = [sys.executable, "-m", "saddler", "init", str(run_dir), "--template", args.template, "--force"]
        for item in args.set:
            init += ["--set", item]
        subprocess.run(init, check=True, capture_output=True)
        stats_file = work / "stats.json"
        env = {**os.environ, "COLUMNS": "200"}
        start = time.time()
        proc = subprocess.run(
            [sys.executable, __file__, "--probe", str(run_dir), str(stats_file), repr(start)],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        wall = time.time() - start
        if proc.returncode != 0 or not stats_file.is_file():
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
            return 1
        stats = json.loads(stats_file.read_text(encoding="utf-8"))
        rollout = stats.get("rollout_s", 0.0)
        print(f"overhead_loadavg_1m: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} cpus)")
        print(f"overhead_fraction: {(wall - rollout) / wall:.3f}")
        print(f"wall_s: {wall:.2f}")
        print(f"rollout_s: {rollout:.2f}")
        print(f"executor_batches: {int(stats.get('executor_batches', 0))}")
        print(f"executor_jobs: {int(stats.get('executor_jobs', 0))}")
        print(f"git_calls: {int(stats.get('git_calls', 0))}")
        print(f"git_s: {stats.get('git_s', 0.0):.2f}")
        print(f"git_long_lived: {int(stats.get('git_long_lived', 0))} (--stdin/--batch processes, many requests each)")
        print(f"sqlite_calls: {int(stats.get('sqlite_calls', 0))}")
        print(f"sqlite_s: {stats.get('sqlite_s', 0.0):.2f}")
        print(f"sqlite_in_rollouts_s: {stats.get('sqlite_in_rollouts_s', 0.0):.2f} (overlaps the rollouts)")
        print(f"startup_s: {stats.get('startup_s', 0.0):.2f}")
        by_command = sorted((k[4:], int(v)) for k, v in stats.items() if k.startswith("git:"))
        print("git_by_command: " + " ".join(f"{name}={n}" for name, n in sorted(by_command, key=lambda x: -x[1])))
        parts = sorted(((k[5:], v) for k, v in stats.items() if k.startswith("part:")), key=lambda kv: -kv[1])
        print("breakdown: " + " ".join(f"{name}={seconds:.2f}" for name, seconds in parts))
        store = sorted(((k[6:], v) for k, v in stats.items() if k.startswith("store:")), key=lambda kv: -kv[1])
        print("sqlite_by_method: " + " ".join(f"{name}={seconds:.3f}" for name, seconds in store[:8]))
        for line in _summary(proc.stdout):
            print(f"summary: {line}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

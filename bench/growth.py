"""What a user pays per iteration as a run grows: time outside rollouts, and what each session is given to read.

    python bench/growth.py [--iterations 1000] [--nodes 10000] [--skip-run]

Two figures, each with its target:

- `growth_nonrollout_ms_ratio`: a real offline opsdesk run of `--iterations` iterations (stall limit off, so the
  late iterations are what a long run's are: cached parent batches, saturated batches, no-patch diagnoses), run in a
  child interpreter that times each iteration from its start to the next one's (the stop check and the loop's
  reads of the store included) less the time inside `Executor.run`; the median over the 20 iterations around
  iteration 100 and the 20 before the last one (`growth_nonrollout_ms_at_<n>`), and their ratio (target <= 1.5).
- `growth_session_input_bytes_max`: for synthetic DAGs of growing size (built in the store as
  `bench/evodag_scale.py` builds them: 10, 100, 300 and 1,000 iterations, and `--nodes`), the bytes of the
  diagnosis prompt plus the output of every `evo-dag` command it names without a placeholder (`history` and
  `lessons` as the prompt names them) and of `scenario` for each failing task when the prompt asks for that, and
  the same for the evolution prompt, all on the session view
  (`evodag.view`), as a session sees it; the largest over sizes and roles (target <= 40,000), and per size
  `growth_<role>_input_bytes_<iterations>`.

Prints grep-able `name: value` lines; exit status 1 when a figure misses its target.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RATIO_TARGET = 1.5
BYTES_TARGET = 40_000
WINDOW = 20
SIZES = (10, 100, 300, 1000)
EVERY_TASK = "`scenario` for every failing task"
"""How a prompt tells the agent to run a TASK_ID command once per failing task (else such a command is a tool it
may use, like `node ID` or `edge A B`, and is not counted)."""


# -- the real run ------------------------------------------------------------------------------------------------


def _probe(run_dir: str, out: str) -> int:
    """Child side: time every iteration of `saddler run run_dir` and the rollouts inside it; JSON to `out`."""
    from saddler.cli.app import app
    from saddler.executor.local import LocalExecutor
    from saddler.run.loop import Optimizer

    starts: list[float] = []
    rollout_at: list[float] = []  # rollout seconds spent before each iteration's start
    spent = [0.0]
    real_run, real_iteration = LocalExecutor.run, Optimizer._iteration

    def timed_run(self: Any, jobs: Any, on_result: Any) -> None:
        start = time.perf_counter()
        try:
            real_run(self, jobs, on_result)
        finally:
            spent[0] += time.perf_counter() - start

    def timed_iteration(self: Any, *args: Any, **kwargs: Any) -> None:
        starts.append(time.perf_counter())
        rollout_at.append(spent[0])
        if len(starts) > 1:  # as it goes: a run stopped early still says what it measured
            with open(out + ".partial", "a", encoding="utf-8") as partial:
                partial.write(f"{(starts[-1] - starts[-2] - (rollout_at[-1] - rollout_at[-2])) * 1000:.3f}\n")
        real_iteration(self, *args, **kwargs)

    LocalExecutor.run = timed_run  # type: ignore[method-assign]
    Optimizer._iteration = timed_iteration  # type: ignore[method-assign]
    code = 0
    try:
        app(["run", run_dir, "--quiet"], standalone_mode=False)
    except SystemExit as exc:
        code = int(exc.code or 0)
    per_iteration = [
        (starts[i + 1] - starts[i] - (rollout_at[i + 1] - rollout_at[i])) * 1000 for i in range(len(starts) - 1)
    ]
    Path(out).write_text(json.dumps({"nonrollout_ms": per_iteration}), encoding="utf-8")
    return code


def real_run(iterations: int, work: Path) -> list[float]:
    """Non-rollout milliseconds of each iteration (but the last) of a real offline opsdesk run."""
    run_dir = work / "run"
    settings = [f"loop.max_iterations={iterations}", "loop.stall_limit=0", "loop.test_runs=1", "executor.sandbox=none"]
    init = [sys.executable, "-m", "saddler", "init", str(run_dir), "--template", "opsdesk", "--force"]
    for item in settings:
        init += ["--set", item]
    subprocess.run(init, check=True, capture_output=True)
    stats = work / "stats.json"
    subprocess.run([sys.executable, __file__, "--probe", str(run_dir), str(stats)], check=True)
    return json.loads(stats.read_text(encoding="utf-8"))["nonrollout_ms"]


def _window(values: list[float], end: int) -> float:
    return statistics.median(values[max(0, end - WINDOW) : end])


# -- what sessions are given to read ------------------------------------------------------------------------------


def synthetic_store(path: Path, size: int, seed: int = 0) -> None:
    """A run of `size` nodes and iterations, built as `bench/evodag_scale.py` builds its DAG, with an evolution
    action and rationale per iteration (what `evo-dag history` shows of an LLM's run)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from evodag_scale import build

    from evodag.store import EvoDAG

    build(path, size, 20, seed=seed)
    rng = random.Random(seed)
    with EvoDAG(path) as s:
        rid = s.get_run().id
        with s.transaction():
            for number in range(1, size):
                s.log_event("iteration.started", {"number": number}, run_id=rid)
                rationale = f"node {number} keeps the best dev so far; its lessons show no true regression " * 2
                action = rng.choice(["continue", "continue", "rebase"])
                s.log_event("evolution.action", {"iteration": number, "action": action, "rationale": rationale,
                                                 "key": f"{action}:{number}"}, run_id=rid)  # fmt: skip


_COMMAND = re.compile(r"(?m)^\s*(evo-dag [^\n#`]*?)\s*(?:#.*)?$|`(evo-dag [^`]*)`")


def told_commands(prompt: str) -> list[str]:
    """The `evo-dag` commands a prompt tells the agent to run (code lines and inline code), placeholders left."""
    found = []
    for block, inline in _COMMAND.findall(prompt):
        command = (block or inline).strip()
        if command and command not in found:
            found.append(command)
    return found


def _evo_dag(db: Path, command: str) -> int:
    """Bytes `evo-dag` prints for `command` on `db`."""
    argv = [sys.executable, "-m", "evodag.cli", *shlex.split(command)[1:], "--db", str(db)]
    done = subprocess.run(argv, capture_output=True, check=False)
    return len(done.stdout)


def session_inputs(db: Path, view: Path, iteration: int) -> dict[str, int]:
    """Bytes of each role's prompt plus what it tells the agent to read, on the store `db` (its view at `view`)."""
    from evodag.store import EvoDAG
    from evodag.view import write_session_view
    from saddler.run import evolution_request as evolution
    from saddler.sessions.prompts import render
    from saddler.sessions.schema import DiagnosisRequest, TaskEvidence

    with EvoDAG(db) as store:
        write_session_view(store, view)
        rid = store.get_run().id
        nodes = store.nodes(run_id=rid)
        best = max((n for n in nodes if n.dev_mean is not None), key=lambda n: n.dev_mean or 0.0)
        current = nodes[-1]
        where = {"run_dir": str(db.parent), "db_path": str(view), "readable": []}
        evo = evolution.build_request(store, rid, iteration, current, best, where)
        failing = [r for r in store.rollouts(node_id=current.id, split="train") if not r.passed][:6]
        origins = evolution.lineage_origins(store, current.id)
    evidence = [
        TaskEvidence(task_id=r.task_id, repetition=r.repetition, seed=r.seed, score=r.score, passed=r.passed,
                        disposition=r.disposition, rationale=r.rationale, trace_path=f"traces/{r.id}.json")
        for r in failing
    ]  # fmt: skip
    diag = DiagnosisRequest(**where, worktree=str(db.parent / "wt"), iteration=iteration, parent_node_id=current.id,
                            phase="capability", allowed_kinds=["capability"], evidence=evidence,
                            component_globs={"capability": ["tools/**"], "steering": ["prompts/**"],
                                             "protected": ["eval/**"]}, lineage_origins=origins)  # fmt: skip
    out = {}
    for role, request in (("diagnosis", diag), ("evolution", evo)):
        prompt = render("diagnosis_patch" if role == "diagnosis" else "evolution", request)
        total = len(prompt.encode("utf-8"))
        for command in told_commands(prompt):
            if "TASK_ID" in command and EVERY_TASK in prompt:  # the prompt asks for it per failing task
                total += sum(_evo_dag(view, command.replace("TASK_ID", t)) for t in dict.fromkeys(
                    e.task_id for e in evidence))  # fmt: skip
            elif not re.search(r"\b(ID|A B|TASK)\b", command):
                total += _evo_dag(view, command)
        out[role] = total
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--skip-run", action="store_true", help="only the session input bytes")
    parser.add_argument("--skip-sessions", action="store_true", help="only the real run's timing")
    parser.add_argument(
        "--keep",
        type=Path,
        help="work in this folder and keep it (the run's per-iteration figures are in stats.json.partial as it goes)",
    )
    parser.add_argument("--probe", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        return _probe(*args.probe)
    failed = False
    with tempfile.TemporaryDirectory(prefix="saddler-bench-growth-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        largest = 0
        for size in () if args.skip_sessions else dict.fromkeys((*SIZES, args.nodes)):
            db = work / f"dag-{size}.sqlite"
            synthetic_store(db, size)
            inputs = session_inputs(db, work / f"view-{size}.sqlite", size)
            for role, total in inputs.items():
                print(f"growth_{role}_input_bytes_{size}: {total}", flush=True)
            largest = max(largest, *inputs.values())
        if not args.skip_sessions:
            print(f"growth_session_input_bytes_max: {largest}")
            failed |= largest > BYTES_TARGET
        if not args.skip_run:
            started = time.perf_counter()
            per = real_run(args.iterations, work)
            early, late = _window(per, min(100, len(per))), _window(per, len(per))
            print(f"growth_nonrollout_ms_at_100: {early:.1f}")
            print(f"growth_nonrollout_ms_at_{args.iterations}: {late:.1f}")
            print(f"growth_nonrollout_ms_ratio: {late / early:.2f}")
            print(f"growth_run_wall_s: {time.perf_counter() - started:.0f}")
            failed |= late / early > RATIO_TARGET
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

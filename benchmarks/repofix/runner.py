"""Run one repofix rollout: check out the task, load the harness, play the issue with the simulated model, grade.

`python -m benchmarks.repofix.runner HARNESS_DIR TASK_ID SEED [--trace-dir D] [--noise X]` prints the
`RolloutResult` as JSON. Harness faults (import errors, exceptions in harness code) become failed results
with disposition `task_failure`; the sandbox's time limit and a full context window end the episode. What is
graded is the checkout the agent submitted: an episode that ends without a submission counts as an empty patch,
as a missing prediction does in SWE-bench. Nothing here raises for harness faults.
"""

from __future__ import annotations

import os
import sys
import time

from benchmarks.repofix.agent import SimCoder
from benchmarks.repofix.env import ContextWindowExceeded, TimeLimitExceeded, Workspace
from benchmarks.repofix.grader import grade
from benchmarks.repofix.plans import solve
from benchmarks.repofix.repos import REPO_BY_ID
from benchmarks.repofix.session import Session, load_harness
from benchmarks.repofix.symptoms import extract_raw
from benchmarks.repofix.tasks import TaskSpec, spec_by_id, task_files
from benchmarks.repofix.verify import review
from benchmarks.simharness import harness_failure
from benchmarks.simkit import result_fields, runner_main, write_trace
from benchmarks.simwatch import WatchReads

TYPE_CHECKING = False  # the CLI path avoids `typing`, `pathlib` and `dataclasses`: children must start fast
if TYPE_CHECKING:
    from typing import Any

PRICE_PER_CHAR = 0.75e-6  # simulated: ~$3 per million tokens at ~4 chars per token


def rollout_dict(
    harness_dir: str | os.PathLike[str],
    spec: TaskSpec,
    seed: int,
    trace_dir: str | os.PathLike[str],
    noise: float = 1.0,
) -> dict[str, Any]:
    """Play `spec` once on the harness at `harness_dir` with `seed`: the `RolloutResult` fields as a plain dict
    (the light path: no `dataclasses`). Never raises for harness faults."""
    started = time.perf_counter()
    harness_dir = os.fspath(harness_dir)
    repo = REPO_BY_ID[spec.group]
    events: list[dict[str, Any]] = []
    log = events.append
    log({"type": "task", "task_id": spec.id, "group": spec.group, "family": spec.family, "seed": seed,
         "prompt": spec.prompt})  # fmt: skip
    ws = Workspace(spec, repo, task_files(spec), rng_key=f"{spec.id}|{seed}", log=log)
    session: Session | None = None
    error_tail, failure_file, disposition = "", None, "success"
    try:
        with WatchReads(harness_dir, os.path.dirname(os.path.dirname(__file__)), log):
            harness = load_harness(harness_dir)
            tools = [(n, t.description) for n, t in harness.tools.items()]
            log({"type": "system", "text": harness.system_prompt, "tools": dict(tools)})
            agent = SimCoder(spec, repo, harness.system_prompt, tools, seed, noise, log, solve, review)
            session = Session(harness, ws, agent, log)
            harness.run(session)
    except TimeLimitExceeded as exc:
        log({"type": "stop", "reason": "time_limit", "message": str(exc)})
    except ContextWindowExceeded as exc:
        log({"type": "stop", "reason": "context_overflow", "message": str(exc)})
    except (Exception, SystemExit) as exc:  # harness code is untrusted: even sys.exit() is its failure
        failure_file, error_tail = harness_failure(exc, harness_dir)
        disposition = "task_failure"
        log({"type": "harness_error", "file": failure_file, "message": f"{type(exc).__name__}: {exc}"})
    if session and session.summary is None and not session.stopped and not any(e["type"] == "stop" for e in events):
        log({"type": "stop", "reason": "no_submit"})
    if session is None or session.summary is None:  # as in SWE-bench: no submission is an empty patch
        reason = next((e["reason"] for e in events if e["type"] == "stop"), "harness error")
        log(
            {
                "type": "no_submission",
                "reason": reason,
                "changed": sorted(p for p in ws.files if ws.files[p] != ws.original.get(p)),
            }
        )
        ws.files = dict(ws.original)
    result = grade(spec, ws)
    log({"type": "grade", "passed": result.passed, "score": result.score, "failed": result.failed,
         "clock": round(ws.clock, 1)})  # fmt: skip
    symptoms = extract_raw(events)
    trace_path, text = write_trace(trace_dir, f"{spec.id}-s{seed}.jsonl", events)
    if failure_file is None and symptoms:
        failure_file = symptoms[0][1]
    out = result_fields(spec.id, result, disposition, error_tail, failure_file)
    out.update(cost=round(len(text) * PRICE_PER_CHAR, 6), llm_calls=session.steps if session else 0)
    out.update(duration_s=time.perf_counter() - started, trace_path=trace_path)
    return out


def main(argv: list[str]) -> int:
    return runner_main(argv, "benchmarks.repofix.runner", spec_by_id, rollout_dict)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

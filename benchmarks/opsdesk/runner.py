"""Run one opsdesk rollout: load the harness, play the task with the simulated agent, grade, write the trace.

`python -m benchmarks.opsdesk.runner HARNESS_DIR TASK_ID SEED [--trace-dir D] [--noise X]` prints the
`RolloutResult` as JSON. Harness faults (import errors, exceptions in harness code) become failed
results with disposition `task_failure`; nothing here raises for them.
"""

from __future__ import annotations

import os
import pickle
import sys
import time

from benchmarks.opsdesk.agent import SimAgent
from benchmarks.opsdesk.env import Env
from benchmarks.opsdesk.grader import grade
from benchmarks.opsdesk.plans import plan_for
from benchmarks.opsdesk.session import Session, load_harness
from benchmarks.opsdesk.symptoms import extract_raw
from benchmarks.opsdesk.tasks import TaskSpec, group_world, spec_by_id
from benchmarks.opsdesk.world import GROUP_BY_ID
from benchmarks.simharness import harness_failure
from benchmarks.simkit import result_fields, runner_main, write_trace
from benchmarks.simwatch import WatchReads

TYPE_CHECKING = False  # the CLI path avoids `typing`, `pathlib` and `dataclasses`: children must start fast
if TYPE_CHECKING:
    from typing import Any


PRICE_PER_CHAR = 0.75e-6  # simulated: ~$3 per million tokens at ~4 chars per token
_WORLD: dict[str, bytes] = {}


def _world_bytes(group_id: str) -> bytes:
    """The group's data pickled once per process: unpickling copies it several times faster than `deepcopy`."""
    if group_id not in _WORLD:
        _WORLD[group_id] = pickle.dumps(group_world(group_id)[0], protocol=pickle.HIGHEST_PROTOCOL)
    return _WORLD[group_id]


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
    group = GROUP_BY_ID[spec.group]
    events: list[dict[str, Any]] = []
    log = events.append
    log(
        {
            "type": "task",
            "task_id": spec.id,
            "group": spec.group,
            "family": spec.family,
            "seed": seed,
            "prompt": spec.prompt,
        }
    )
    data = pickle.loads(_world_bytes(spec.group))  # a fresh copy of the group's data, as deepcopy gave
    env = Env(
        data,
        transient=min(1.0, group.transient * noise),
        send_limit=group.send_limit,
        rng_key=f"{spec.id}|{seed}",
        log=log,
    )
    session: Session | None = None
    error_tail, failure_file, disposition = "", None, "success"
    try:
        with WatchReads(harness_dir, os.path.dirname(os.path.dirname(__file__)), log):
            harness = load_harness(harness_dir)
            log(
                {
                    "type": "system",
                    "text": harness.system_prompt,
                    "tools": {n: t.description for n, t in harness.tools.items()},
                }
            )
            agent = SimAgent(
                spec,
                harness.system_prompt,
                [(n, t.description) for n, t in harness.tools.items()],
                seed,
                noise,
                log,
                plan_for(spec.family),
            )
            session = Session(harness, env, agent, log)
            harness.run(session)
    except (Exception, SystemExit) as exc:  # harness code is untrusted: even sys.exit() is its failure
        failure_file, error_tail = harness_failure(exc, harness_dir)
        disposition = "task_failure"
        log({"type": "harness_error", "file": failure_file, "message": f"{type(exc).__name__}: {exc}"})
    answer = session.answer if session else None
    if session and answer is None and not session.stopped:
        log({"type": "stop", "reason": "no_finish"})
    result = grade(spec, env, answer)
    log({"type": "grade", "passed": result.passed, "score": result.score, "failed": result.failed, "answer": answer})
    symptoms = extract_raw(events)
    trace_path, text = write_trace(trace_dir, f"{spec.id}-s{seed}.jsonl", events)
    if failure_file is None and symptoms:
        failure_file = symptoms[0][1]
    out = result_fields(spec.id, result, disposition, error_tail, failure_file)
    out.update(cost=round(len(text) * PRICE_PER_CHAR, 6), llm_calls=session.steps if session else 0)
    out.update(duration_s=time.perf_counter() - started, trace_path=trace_path)
    return out


def main(argv: list[str]) -> int:
    return runner_main(argv, "benchmarks.opsdesk.runner", spec_by_id, rollout_dict)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

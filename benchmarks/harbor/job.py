"""One Harbor job for a batch of rollouts: every task and repetition in one `harbor run`, results as they land.

A Harbor job runs each of its tasks with each of its agents (tasks × agents × attempts). saddler makes one agent
entry per (seed, repetition) of the batch, all the candidate's agent class, each with its own `SADDLER_BENCH_SEED`
and `SADDLER_BENCH_REPETITION` (Harbor's `agents[].env`, which reach the agent as `self.extra_env` and every
command it runs in the sandbox), so one job runs exactly the batch when its rollouts are a full grid; otherwise
rollouts are grouped into as few jobs as make grids. The agents go in a job config file (`-c`), the rest as
flags every Harbor version takes. While the job runs, each trial folder whose `result.json` is complete is
copied into its rollout's trace folder and its result handed on at once, so a job killed half-way leaves every
finished trial stored and the next evaluation runs only the missing ones.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.harbor.trial import TAIL, render_transcript, result_of
from saddler.benchmark import Batch, BatchRollout, RolloutResult
from saddler.procs import ProcessRun, run_process_group

if TYPE_CHECKING:
    from collections.abc import Callable

    from benchmarks.harbor import HarborBenchmark

SEED_VAR, REPETITION_VAR = "SADDLER_BENCH_SEED", "SADDLER_BENCH_REPETITION"
BWRAP_ENV = "saddler_bwrap:BwrapEnvironment"
ENVIRONMENTS = Path(__file__).with_name("environments")  # saddler_bwrap.py: put on the job's PYTHONPATH
POLL_S = 0.2


def plan_jobs(rollouts: list[BatchRollout]) -> list[list[BatchRollout]]:
    """The rollouts grouped into Harbor jobs: (seed, repetition) pairs that need the same tasks share a job."""
    by_agent: dict[tuple[int, int], list[BatchRollout]] = {}
    for rollout in rollouts:
        by_agent.setdefault((rollout.seed, rollout.repetition), []).append(rollout)
    jobs: dict[tuple[str, ...], list[BatchRollout]] = {}
    for items in by_agent.values():
        jobs.setdefault(tuple(sorted({r.task.id for r in items})), []).extend(items)
    return list(jobs.values())


def job_config(bench: HarborBenchmark, rollouts: list[BatchRollout]) -> dict[str, Any]:
    """The job config file's content: one agent entry per (seed, repetition), the candidate's agent class."""
    agents = []
    for seed, repetition in sorted({(r.seed, r.repetition) for r in rollouts}):
        agent: dict[str, Any] = {"import_path": bench.agent_import_path, "kwargs": dict(bench.agent_kwargs)}
        agent["env"] = {SEED_VAR: str(seed), REPETITION_VAR: str(repetition)}
        if bench.model:
            agent["model_name"] = bench.model
        agents.append(agent)
    return {"agents": agents}


def environment_arg(env: str) -> str:
    """`-e`'s value: a Harbor environment name or import path; `bwrap` is the bundled bubblewrap environment."""
    return BWRAP_ENV if env == "bwrap" else env


def build_command(
    bench: HarborBenchmark, rollouts: list[BatchRollout], config: Path, jobs_dir: Path, job_name: str, workers: int
) -> list[str]:
    """The `harbor run` argv of one job of `rollouts` (its agents in the config file `config`)."""
    source = ["-d", bench.dataset] if bench.dataset else ["-p", bench.path]
    argv = [bench.harbor, "run", "-c", str(config), *source]
    for task in sorted({r.task.id for r in rollouts}):
        argv += ["-i", task]
    argv += ["-e", environment_arg(bench.env), "-k", "1", "-n", str(max(1, workers))]
    if bench.timeout_multiplier is not None:
        argv += ["--timeout-multiplier", f"{bench.timeout_multiplier:g}"]
    return [*argv, "--job-name", job_name, "--jobs-dir", str(jobs_dir), "-y", *bench.extra_args]


def harbor_env(bench: HarborBenchmark, base: dict[str, str], harness_dir: Path) -> dict[str, str]:
    """The job's environment: `base` (the rollout environment) with the harness first on PYTHONPATH, so Harbor
    imports the candidate's agent, the bundled environments folder for `env = "bwrap"`, LiteLLM told to use its
    bundled price table instead of retrying a download (about 10 s per job without network) and Harbor's
    telemetry off (unless the environment sets them)."""
    env = dict(base)
    paths = [str(harness_dir), str(ENVIRONMENTS) if bench.env == "bwrap" else "", env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.setdefault("HARBOR_TELEMETRY", "0")  # no usage report to Harbor's analytics (and no wait for it at exit)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


def run_batch(bench: HarborBenchmark, batch: Batch, on_result: Callable[[BatchRollout, RolloutResult], None]) -> None:
    """Run `batch` as Harbor jobs (see the module docstring); `on_result` once per rollout, from this thread."""
    for index, rollouts in enumerate(plan_jobs(list(batch.rollouts))):
        _run_job(bench, batch, rollouts, batch.folder / "jobs", _fresh_name(batch.folder / "jobs", index), on_result)


def _fresh_name(jobs_dir: Path, index: int) -> str:
    n = 0
    while (jobs_dir / f"saddler-{index}-{n}").exists() or (jobs_dir.parent / f"saddler-{index}-{n}.json").exists():
        n += 1
    return f"saddler-{index}-{n}"


def _run_job(
    bench: HarborBenchmark,
    batch: Batch,
    rollouts: list[BatchRollout],
    jobs_dir: Path,
    name: str,
    on_result: Callable[[BatchRollout, RolloutResult], None],
) -> None:
    jobs_dir.mkdir(parents=True, exist_ok=True)
    config = batch.folder / f"{name}.json"
    config.write_text(json.dumps(job_config(bench, rollouts), indent=2), encoding="utf-8")
    argv = build_command(bench, rollouts, config, jobs_dir, name, batch.workers)
    command = shlex.join(argv)
    env = harbor_env(bench, dict(batch.env), batch.harness_dir)
    timeout = batch.timeout_s * math.ceil(len(rollouts) / max(1, batch.workers))
    pending = {(r.task.id, r.seed, r.repetition): r for r in rollouts}
    done: dict[Path, BatchRollout] = {}
    if shutil.which(bench.harbor, path=env.get("PATH")) is None:
        from benchmarks.harbor import MISSING_CLI

        _finish_missing(pending, command, "infra_error", MISSING_CLI, on_result)
        return
    outcome: dict[str, ProcessRun] = {}

    def job() -> None:
        outcome["run"] = run_process_group(argv, cwd=batch.harness_dir, env=env, timeout_s=timeout)

    thread = threading.Thread(target=job, name=f"harbor-{name}", daemon=True)
    thread.start()
    while thread.is_alive():
        _collect(bench, batch, jobs_dir / name, pending, done, command, on_result, final=False)
        thread.join(POLL_S)
    _collect(bench, batch, jobs_dir / name, pending, done, command, on_result, final=True)
    run = outcome["run"]
    (batch.folder / f"{name}.log").write_text(f"$ {command}\n\n{run.stdout}\n{run.stderr}", encoding="utf-8")
    for trial, rollout in done.items():  # the job may have touched a trial after its result landed
        shutil.copytree(trial, rollout.trace_dir / "trial", dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(trial, ignore_errors=True)
    if run.timed_out:
        why = f"[saddler] timed out after {timeout:g}s: the Harbor job of {len(rollouts)} trial(s) was stopped"
        _finish_missing(pending, command, "timeout", why, on_result)
    else:
        output = (run.stderr.strip() + "\n" + run.stdout.strip()).strip()
        head = f"harbor run exited {run.returncode} without a result for this trial"
        last = next(iter((run.stderr.strip() or run.stdout.strip()).splitlines()[-1:]), "")
        why = f"{head}: {last}\n" + output[-(TAIL - len(head) - len(last) - 3) :]
        _finish_missing(pending, command, "infra_error", why, on_result)


def _collect(
    bench: HarborBenchmark,
    batch: Batch,
    job_dir: Path,
    pending: dict[tuple[str, int, int], BatchRollout],
    done: dict[Path, BatchRollout],
    command: str,
    on_result: Callable[[BatchRollout, RolloutResult], None],
    *,
    final: bool,
) -> None:
    """Hand on every trial of `job_dir` whose result.json is complete and that is not handed on yet."""
    for result_file in sorted(job_dir.glob("*/result.json")):
        trial = result_file.parent
        if trial in done:
            continue
        try:
            data = json.loads(result_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue  # still being written
        if not data.get("finished_at") and not final:
            continue
        agent_env = ((data.get("config") or {}).get("agent") or {}).get("env") or {}
        rollout = _match(pending, str(data.get("task_name", "")), agent_env)
        if rollout is None:
            continue
        done[trial] = rollout
        del pending[(rollout.task.id, rollout.seed, rollout.repetition)]
        copy = rollout.trace_dir / "trial"
        shutil.copytree(trial, copy, dirs_exist_ok=True, symlinks=True)
        transcript = rollout.trace_dir / "transcript.md"
        transcript.write_text(render_transcript(copy, data, command), encoding="utf-8")
        result = result_of(
            data, task_id=rollout.task.id, harness_dir=batch.harness_dir, reward_key=bench.reward_key,
            pass_threshold=bench.pass_threshold, transcript=transcript,
        )  # fmt: skip
        result.duration_s = _duration(data)
        on_result(rollout, result)


def _match(
    pending: dict[tuple[str, int, int], BatchRollout], task_name: str, agent_env: dict[str, str]
) -> BatchRollout | None:
    try:
        seed, repetition = int(agent_env[SEED_VAR]), int(agent_env.get(REPETITION_VAR, 0))
    except (KeyError, ValueError):
        return None
    for name in (task_name, task_name.rpartition("/")[2]):
        if (name, seed, repetition) in pending:
            return pending[(name, seed, repetition)]
    return None


def _duration(data: dict[str, Any]) -> float:
    try:
        start, end = (
            datetime.fromisoformat(str(data[k]).replace("Z", "+00:00")) for k in ("started_at", "finished_at")
        )
    except (KeyError, ValueError):
        return 0.0
    return max(0.0, (end - start).total_seconds())


def _finish_missing(
    pending: dict[tuple[str, int, int], BatchRollout],
    command: str,
    disposition: str,
    why: str,
    on_result: Callable[[BatchRollout, RolloutResult], None],
) -> None:
    for key in list(pending):
        rollout = pending.pop(key)
        rollout.trace_dir.mkdir(parents=True, exist_ok=True)
        transcript = rollout.trace_dir / "transcript.md"
        transcript.write_text(f"# {rollout.task.id}: no result\n\n$ {command}\n\n```\n{why}\n```\n", encoding="utf-8")
        first = why.splitlines()[0] if why else disposition
        on_result(rollout, RolloutResult(rollout.task.id, 0.0, False, disposition, trace_path=str(transcript),
                                         error_tail=why[:TAIL], rationale=first[:500]))  # fmt: skip

"""One Harbor trial: the `harbor run` command for one task, and its result read back from the trial folder.

Harbor writes `<jobs dir>/<job name>/<trial name>/result.json` (a `TrialResult`: `verifier_result.rewards`,
`exception_info`, `agent_result` with tokens and cost, phase timings) next to `agent/` (the agent's logs,
`trajectory.json` in ATIF), `verifier/` (`reward.txt`, `test-stdout.txt`) and `trial.log`. A trial without a
result, or whose exception is Harbor's own (sandbox, build), is an `infra_error`; an exception raised from the
candidate's agent code is a `task_failure`; an agent timeout is a `timeout`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saddler.benchmark import RolloutResult, Task
from saddler.procs import run_process_group

if TYPE_CHECKING:
    from benchmarks.harbor import HarborBenchmark

JOB_NAME = "saddler"
TIMEOUTS = ("AgentTimeoutError", "VerifierTimeoutError")
MAX_TEXT = 4000


def build_command(bench: HarborBenchmark, task: Task, seed: int, jobs_dir: Path) -> list[str]:
    """The `harbor run` argv of one trial of `task` with the harness's agent, its job in `jobs_dir`."""
    source = ["-d", bench.dataset] if bench.dataset else ["-p", bench.path]
    argv = [bench.harbor, "run", *source, "-i", task.id, "--agent-import-path", bench.agent_import_path]
    if bench.model:
        argv += ["-m", bench.model]
    for key, value in sorted(bench.agent_kwargs.items()):
        argv += ["--ak", f"{key}={value}"]
    argv += ["--ae", f"SADDLER_BENCH_SEED={seed}", "-e", bench.env, "-k", "1", "-n", "1"]
    if bench.timeout_multiplier is not None:
        argv += ["--timeout-multiplier", f"{bench.timeout_multiplier:g}"]
    return [*argv, "--job-name", JOB_NAME, "--jobs-dir", str(jobs_dir), "-y", *bench.extra_args]


def harbor_env(harness_dir: Path) -> dict[str, str]:
    """The rollout's environment with the harness first on PYTHONPATH (so `--agent-import-path` finds it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(harness_dir), env.get("PYTHONPATH", "")) if p)
    return env


def run_trial(bench: HarborBenchmark, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
    """Run one trial of `task` and read its result (see the module docstring)."""
    from benchmarks.harbor import MISSING_CLI

    trace_dir.mkdir(parents=True, exist_ok=True)
    transcript = trace_dir / "transcript.md"
    if shutil.which(bench.harbor) is None:
        transcript.write_text(f"# {task.id}: not run\n\n{MISSING_CLI}\n", encoding="utf-8")
        return RolloutResult(task.id, 0.0, False, "infra_error", trace_path=str(transcript), error_tail=MISSING_CLI)
    argv = build_command(bench, task, seed, trace_dir / "jobs")
    run = run_process_group(argv, cwd=harness_dir, env=harbor_env(harness_dir), timeout_s=24 * 3600.0)
    (trace_dir / "harbor.log").write_text(f"$ {' '.join(argv)}\n\n{run.stdout}\n{run.stderr}", encoding="utf-8")
    result = read_trial(bench, trace_dir / "jobs" / JOB_NAME, task, harness_dir, argv, run.stderr or run.stdout)
    result.duration_s = run.duration_s
    return result


def find_trial(job_dir: Path) -> Path | None:
    """The one trial folder of a job (the folder holding a trial's result.json), or None."""
    found = sorted(p.parent for p in job_dir.glob("*/result.json"))
    return found[0] if found else None


def read_trial(
    bench: HarborBenchmark, job_dir: Path, task: Task, harness_dir: Path, argv: list[str], output: str
) -> RolloutResult:
    """The rollout's result from the job folder Harbor wrote; writes transcript.md beside the jobs folder."""
    transcript = job_dir.parent.parent / "transcript.md"
    trial = find_trial(job_dir)
    if trial is None:
        tail = f"harbor wrote no trial result under {job_dir}; its output ends:\n{output[-MAX_TEXT:]}"
        transcript.write_text(f"# {task.id}: no result\n\n$ {' '.join(argv)}\n\n```\n{tail}\n```\n", encoding="utf-8")
        return RolloutResult(task.id, 0.0, False, "infra_error", trace_path=str(transcript), error_tail=tail[-2000:])
    data = json.loads((trial / "result.json").read_text(encoding="utf-8"))
    transcript.write_text(render_transcript(trial, data, argv), encoding="utf-8")
    agent = data.get("agent_result") or {}
    cost = float(agent.get("cost_usd") or 0.0)
    error = data.get("exception_info")
    rewards = (data.get("verifier_result") or {}).get("rewards") or {}
    common: dict[str, Any] = {"cost": cost, "trace_path": str(transcript)}
    if error and not rewards:
        kind = str(error.get("exception_type", ""))
        trace = str(error.get("exception_traceback", ""))
        module = bench.agent_import_path.partition(":")[0].replace(".", "/")
        ours = str(harness_dir) in trace or f"{module}.py" in trace
        disposition = "timeout" if kind in TIMEOUTS else ("task_failure" if ours else "infra_error")
        message = f"{kind}: {error.get('exception_message', '')}"
        return RolloutResult(task.id, 0.0, False, disposition, error_tail=(message + "\n" + trace)[-2000:],
                             rationale=message[:500], failure_file=f"{module}.py" if ours else None,
                             **common)  # fmt: skip
    if bench.reward_key in rewards:
        reward = rewards[bench.reward_key]
    elif len(rewards) == 1:
        reward = next(iter(rewards.values()))
    else:
        tail = f"no verifier reward {bench.reward_key!r} in {trial / 'result.json'} (rewards: {sorted(rewards)})"
        return RolloutResult(task.id, 0.0, False, "infra_error", error_tail=tail, **common)
    score = min(1.0, max(0.0, float(reward)))
    passed = score >= bench.pass_threshold
    why = "" if passed else f"verifier reward {reward!r}; see the test output in the transcript"
    return RolloutResult(task.id, score, passed, "success" if passed else "task_failure", rationale=why, **common)


def render_transcript(trial: Path, data: dict[str, Any], argv: list[str]) -> str:
    """The trial as markdown: command, reward, exception, trajectory steps, verifier output."""
    lines = [f"# Harbor trial {data.get('trial_name', trial.name)} (task {data.get('task_name', '?')})", ""]
    lines += [f"$ {' '.join(argv)}", "", f"Trial folder: `{trial}`", ""]
    rewards = (data.get("verifier_result") or {}).get("rewards")
    lines += [f"Verifier rewards: {json.dumps(rewards)}", ""]
    agent = data.get("agent_result") or {}
    if agent:
        lines += [f"Agent usage: {agent.get('n_input_tokens')} input / {agent.get('n_output_tokens')} output "
                  f"tokens, cost {agent.get('cost_usd')} USD", ""]  # fmt: skip
    error = data.get("exception_info")
    if error:
        lines += ["## Exception", "", f"{error.get('exception_type')}: {error.get('exception_message')}", "", "```",
                  str(error.get("exception_traceback", ""))[-MAX_TEXT:], "```", ""]  # fmt: skip
    lines += _trajectory(trial / "agent" / "trajectory.json")
    stdout = trial / "verifier" / "test-stdout.txt"
    if stdout.is_file():
        lines += ["## Verifier output (tail)", "", "```", stdout.read_text(errors="replace")[-MAX_TEXT:], "```", ""]
    return "\n".join(lines) + "\n"


def _trajectory(path: Path) -> list[str]:
    if not path.is_file():
        return ["## Trajectory", "", "(the agent wrote no agent/trajectory.json; see agent/ in the trial folder)", ""]
    try:
        steps = json.loads(path.read_text(encoding="utf-8")).get("steps") or []
    except (json.JSONDecodeError, AttributeError):
        return ["## Trajectory", "", f"(unreadable: {path})", ""]
    lines = ["## Trajectory", ""]
    for step in steps:
        lines.append(f"### {step.get('step_id', '?')}. {step.get('source', '?')}")
        lines += ["", str(step.get("message") or "")[:MAX_TEXT]]
        for call in step.get("tool_calls") or []:
            arguments = json.dumps(call.get("arguments"), ensure_ascii=False)[:1000]
            lines.append(f"- tool call `{call.get('function_name')}` {arguments}")
        for result in (step.get("observation") or {}).get("results") or []:
            lines.append(f"- observation: {str(result.get('content'))[:1500]}")
        lines.append("")
    return lines

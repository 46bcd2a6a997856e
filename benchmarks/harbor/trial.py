"""One Harbor trial read back: its `result.json` as a `RolloutResult`, and its `transcript.md`.

Harbor (0.26) writes `<job>/<trial>/result.json`, a `TrialResult`: `verifier_result.rewards`, `reward_valid`,
`exception_info` (`exception_type`, `exception_message`, `exception_traceback`, and `policy`: `should_retry`,
`should_grade`, `has_valid_reward`, from Harbor's table of exception types) and, for a multi-step task,
`step_results[]` (each with its own `verifier_result` and `exception_info`). The verifier still grades after an
agent timeout or an exception in the agent (`policy.should_grade`), so a reward alone does not say what happened.

How a trial becomes a rollout result (the first rule that holds):

1. An agent timeout (`AgentTimeoutError`) whose reward does not pass: `timeout` (`failure_file`: the harness file
   the agent was in when it was stopped, if the traceback shows one).
2. An exception raised from the candidate's own code (a traceback frame in a harness file): `task_failure`, with
   `failure_file` that file and the exception as rationale; the score is the verifier's reward when it is valid.
3. No valid reward (no verifier result, or an exception whose policy says the reward is not valid, such as a
   sandbox that never started or the model's API failing): `infra_error`, not the candidate's fault.
4. Otherwise the verifier's reward: `success` when it reaches `pass_threshold`, else `task_failure` (any other
   exception, such as the agent's process exiting non-zero, is named in the rationale).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from saddler.benchmark import RolloutResult

TIMEOUTS = ("AgentTimeoutError",)
MAX_TEXT = 4000
TAIL = 2000
# Harbor's own policy for exception types whose reward is not valid, for results written before `policy` was
# recorded (older Harbor): the sandbox or the model's API failed, not the agent.
_NO_VALID_REWARD = (
    "EnvironmentStartTimeoutError", "SandboxBuildFailedError", "AgentSetupTimeoutError", "HealthcheckError",
    "ApiError", "ApiRateLimitError", "ApiInternalServerError", "ApiConnectionError", "RateLimitError",
    "InternalServerError", "ServiceUnavailableError", "APIConnectionError", "APIError", "Timeout",
    "AuthenticationError", "PermissionDeniedError", "NotFoundError", "VerifierTimeoutError",
    "RewardFileNotFoundError", "RewardFileEmptyError", "VerifierOutputParseError", "CancelledError",
)  # fmt: skip
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def exceptions_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The trial's exceptions, trial-level first, then each step's (named `step <name>`), as Harbor orders them."""
    found = [dict(data["exception_info"], step="")] if data.get("exception_info") else []
    for step in data.get("step_results") or []:
        if step.get("exception_info"):
            found.append(dict(step["exception_info"], step=str(step.get("step_name", ""))))
    return found


def reward_valid(data: dict[str, Any]) -> bool:
    """Harbor's `reward_valid` when recorded, else the same rule: rewards exist and no exception voids them."""
    if "reward_valid" in data:
        return bool(data["reward_valid"])
    if not (data.get("verifier_result") or {}).get("rewards"):
        return False
    return all(_policy(e).get("has_valid_reward", True) for e in exceptions_of(data))


def _policy(error: dict[str, Any]) -> dict[str, Any]:
    if isinstance(error.get("policy"), dict):
        return error["policy"]
    return {"has_valid_reward": str(error.get("exception_type", "")) not in _NO_VALID_REWARD}


def harness_frame(traceback: str, harness_dir: Path) -> tuple[str, int] | None:
    """The innermost traceback frame in a harness file, as (path relative to the harness, line): a frame under
    `harness_dir`, else one whose path ends with a file the harness has (a trial recorded elsewhere)."""
    prefixes = {str(harness_dir).rstrip("/") + "/", str(harness_dir.resolve()).rstrip("/") + "/"}
    for path, line in reversed(_FRAME.findall(traceback)):
        inside = next((prefix for prefix in prefixes if path.startswith(prefix)), None)
        if inside is not None:
            return path[len(inside) :], int(line)
        parts = Path(path).parts
        for i in range(1, len(parts)):
            relative = Path(*parts[i:])
            if "site-packages" not in parts and (harness_dir / relative).is_file():
                return relative.as_posix(), int(line)
    return None


def result_of(
    data: dict[str, Any], *, task_id: str, harness_dir: Path, reward_key: str, pass_threshold: float, transcript: Path
) -> RolloutResult:
    """The rollout result one trial's `result.json` (`data`) stands for (the rules of the module docstring)."""
    agent = data.get("agent_result") or {}
    cost = float(agent.get("cost_usd") or 0.0) + sum(
        float((s.get("agent_result") or {}).get("cost_usd") or 0.0) for s in data.get("step_results") or []
    )
    common: dict[str, Any] = {"cost": cost, "trace_path": str(transcript)}
    errors = exceptions_of(data)
    rewards = (data.get("verifier_result") or {}).get("rewards") or {}
    valid = reward_valid(data)
    reward = _reward(rewards, reward_key) if valid else None
    score = min(1.0, max(0.0, float(reward))) if reward is not None else 0.0
    passed = reward is not None and score >= pass_threshold
    described = [_describe(e) for e in errors]
    traces = [f"{d}\n{e.get('exception_traceback', '')}".strip() for d, e in zip(described, errors, strict=True)]
    tail = "\n\n".join(traces)[-TAIL:]
    frames = [harness_frame(str(e.get("exception_traceback", "")), harness_dir) for e in errors]
    for error, text, frame in zip(errors, described, frames, strict=True):
        if error.get("exception_type") in TIMEOUTS and not passed:
            where = f" (the agent was at {frame[0]}:{frame[1]} of the harness)" if frame else ""
            return RolloutResult(task_id, score, False, "timeout", error_tail=tail, rationale=(text + where)[:500],
                                 failure_file=frame[0] if frame else None, **common)  # fmt: skip
    for text, frame in zip(described, frames, strict=True):
        if frame is not None:
            why = f"{text} (raised at {frame[0]}:{frame[1]} of the harness)"
            return RolloutResult(task_id, score, False, "task_failure", error_tail=tail, rationale=why[:500],
                                 failure_file=frame[0], **common)  # fmt: skip
    if reward is None:
        if valid:
            why = f"no verifier reward {reward_key!r} in result.json (rewards: {sorted(rewards)})"
        elif errors:
            why = f"{described[0]}: Harbor records no valid reward for it"
        else:
            why = "the verifier wrote no reward (result.json has no verifier_result)"
        return RolloutResult(task_id, 0.0, False, "infra_error", error_tail=(tail or why)[-TAIL:], rationale=why[:500],
                             **common)  # fmt: skip
    steps = _step_rewards(data)
    why = "" if passed else f"verifier reward {reward!r}{steps}; see the test output in the transcript"
    if described:
        why = "; ".join([why, *described]).strip("; ")
    return RolloutResult(task_id, score, passed, "success" if passed else "task_failure", error_tail=tail,
                         rationale=why[:500], **common)  # fmt: skip


def _reward(rewards: dict[str, Any], key: str) -> float | None:
    if key in rewards:
        return float(rewards[key])
    if len(rewards) == 1:
        return float(next(iter(rewards.values())))
    return None


def _describe(error: dict[str, Any]) -> str:
    where = f" in step {error['step']}" if error.get("step") else ""
    return f"{error.get('exception_type', 'Exception')}{where}: {error.get('exception_message', '')}".strip()


def _step_rewards(data: dict[str, Any]) -> str:
    steps = data.get("step_results") or []
    if not steps:
        return ""
    parts = [f"{s.get('step_name')}={((s.get('verifier_result') or {}).get('rewards') or {})}" for s in steps]
    return f" (steps: {', '.join(parts)})"


def render_transcript(trial: Path, data: dict[str, Any], command: str) -> str:
    """The trial as markdown: command, where its files are, rewards, exceptions, trajectory, verifier output."""
    lines = [f"# Harbor trial {data.get('trial_name', trial.name)} (task {data.get('task_name', '?')})", ""]
    lines += [f"$ {command}", "", f"Trial folder: `{trial}`", ""]
    rewards = (data.get("verifier_result") or {}).get("rewards")
    lines += [f"Verifier rewards: {json.dumps(rewards)} (reward_valid: {reward_valid(data)})", ""]
    agent = data.get("agent_result") or {}
    if agent:
        lines += [f"Agent usage: {agent.get('n_input_tokens')} input / {agent.get('n_output_tokens')} output "
                  f"tokens, cost {agent.get('cost_usd')} USD", ""]  # fmt: skip
    for error in exceptions_of(data):
        lines += ["## Exception", "", _describe(error), "", "```",
                  str(error.get("exception_traceback", ""))[-MAX_TEXT:], "```", ""]  # fmt: skip
    step_dirs = [trial / "steps" / str(s.get("step_name")) for s in data.get("step_results") or []]
    for folder in step_dirs or [trial]:
        title = f" (step {folder.name})" if step_dirs else ""
        lines += _trajectory(folder / "agent" / "trajectory.json", title)
        stdout = folder / "verifier" / "test-stdout.txt"
        if stdout.is_file():
            text = stdout.read_text(errors="replace")[-MAX_TEXT:]
            lines += [f"## Verifier output{title} (tail)", "", "```", text, "```", ""]
    return "\n".join(lines) + "\n"


def _trajectory(path: Path, title: str) -> list[str]:
    if not path.is_file():
        return [f"## Trajectory{title}", "", "(the agent wrote no agent/trajectory.json; see agent/)", ""]
    try:
        steps = json.loads(path.read_text(encoding="utf-8")).get("steps") or []
    except (json.JSONDecodeError, AttributeError):
        return [f"## Trajectory{title}", "", f"(unreadable: {path})", ""]
    lines = [f"## Trajectory{title}", ""]
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

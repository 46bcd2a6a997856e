"""One Inspect rollout: evaluate one sample with the candidate's solver at a seed, read its log, write the trace.

The candidate is data: a solver file that is missing or fails to import, or a solver that raises, is a
`task_failure` carrying the error; an error outside the harness (the model API, Inspect itself) is an
`infra_error`. The Inspect log (`*.eval`) and `transcript.md` are written to the rollout's own trace folder.
"""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.inspect.dataset import find_sample, load_inspect_task
from saddler.benchmark import RolloutResult, Task

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

    from benchmarks.inspect import InspectBenchmark

MAX_TEXT = 4000


class HarnessFault(Exception):
    """The candidate's harness could not give a solver (missing file or factory, import error)."""


def load_solver(harness_dir: Path, spec: str, args: dict[str, Any]) -> Any:
    """Import `FILE.py` from the harness (its folder importable) and call `factory(**args)`."""
    file, _, name = spec.partition("@")
    path = harness_dir / file
    if not path.is_file():
        raise HarnessFault(f"the harness has no {file} (benchmark_options.solver = {spec!r})")
    _forget_other_harnesses(harness_dir)
    if str(harness_dir) not in sys.path:
        sys.path.insert(0, str(harness_dir))
    module_name = "saddler_harness_" + path.stem
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
        factory = getattr(module, name, None)
        if not callable(factory):
            raise HarnessFault(f"{file} defines no callable {name!r} (benchmark_options.solver = {spec!r})")
        return factory(**args)
    except HarnessFault:
        raise
    except Exception as exc:
        raise HarnessFault(f"{file}: {''.join(traceback.format_exception(exc))[-MAX_TEXT:]}") from exc


_HARNESS_DIRS: set[str] = set()


def _forget_other_harnesses(harness_dir: Path) -> None:
    """Drop modules and sys.path entries of harnesses loaded before in this process (a rollout child loads
    one; an in-process caller may load several candidates, whose same-named modules must not be reused)."""
    current = str(harness_dir)
    for old in _HARNESS_DIRS - {current}:
        while old in sys.path:
            sys.path.remove(old)
        for name, module in list(sys.modules.items()):
            origin = getattr(module, "__file__", None) or ""
            if origin.startswith(old + "/"):
                del sys.modules[name]
    _HARNESS_DIRS.intersection_update({current})
    _HARNESS_DIRS.add(current)


def make_model(bench: InspectBenchmark) -> Any:
    """The task model; `mockllm/*` answers `mock_outputs` in turn (a string is a reply, a table `{tool, arguments}`
    a tool call), cycling, with zero usage (no tokenizer download)."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    if not bench.model.startswith("mockllm/"):
        return get_model(bench.model, **bench.model_args)
    answers = itertools.cycle(bench.mock_outputs or ["Default output from mockllm/model"])

    def outputs(*_args: Any) -> ModelOutput:
        answer = next(answers)
        if isinstance(answer, dict):
            out = ModelOutput.for_tool_call("mockllm", str(answer["tool"]), dict(answer.get("arguments") or {}))
        else:
            out = ModelOutput.from_content(model="mockllm", content=str(answer))
        out.usage = ModelUsage()
        return out

    return get_model(bench.model, custom_outputs=outputs, memoize=False, **bench.model_args)


def run_sample(bench: InspectBenchmark, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
    """Evaluate sample `task.id` of the benchmark's Inspect task with the harness's solver at `seed`."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai import task_with
    from inspect_ai.dataset import MemoryDataset

    start = time.perf_counter()
    trace_dir.mkdir(parents=True, exist_ok=True)
    rel_solver = bench.solver.partition("@")[0]
    try:
        solver = load_solver(harness_dir, bench.solver, bench.solver_args)
    except HarnessFault as exc:
        _write(trace_dir / "transcript.md", f"# {task.id}: no solver\n\n{exc}\n")
        return RolloutResult(task.id, 0.0, False, "task_failure", trace_path=str(trace_dir / "transcript.md"),
                             error_tail=str(exc)[-2000:], rationale="the harness gave no solver",
                             failure_file=rel_solver, duration_s=time.perf_counter() - start)  # fmt: skip
    inspect_task = load_inspect_task(bench.task, bench.task_args)
    sample = find_sample(inspect_task, task.id)
    if sample is None:
        return RolloutResult(task.id, 0.0, False, "infra_error", error_tail=f"sample {task.id} not in {bench.task}")
    if sample.id is None:
        sample.id = task.id
    task_with(inspect_task, dataset=MemoryDataset([sample]))
    limits: dict[str, Any] = {k: v for k, v in bench.limits.items() if v is not None}
    try:
        logs = inspect_eval(
            inspect_task, model=make_model(bench), solver=solver, display="none", log_dir=str(trace_dir),
            log_format="eval", seed=seed, epochs=1, fail_on_error=True, log_level="warning", **limits,
        )  # fmt: skip
    except Exception as exc:  # eval itself refused to start: not the sample's doing
        tail = "".join(traceback.format_exception(exc))[-2000:]
        _write(trace_dir / "transcript.md", f"# {task.id}: Inspect could not run\n\n```\n{tail}\n```\n")
        return RolloutResult(task.id, 0.0, False, "infra_error", trace_path=str(trace_dir / "transcript.md"),
                             error_tail=tail, duration_s=time.perf_counter() - start)  # fmt: skip
    result = read_result(bench, logs[0], task, harness_dir, trace_dir)
    result.duration_s = time.perf_counter() - start
    return result


def read_result(bench: InspectBenchmark, log: EvalLog, task: Task, harness_dir: Path, trace_dir: Path) -> RolloutResult:
    """The rollout's result from its Inspect log; writes transcript.md next to the log."""
    from inspect_ai.log import read_eval_log
    from inspect_ai.scorer import value_to_float

    full = read_eval_log(log.location) if log.location else log
    sample = full.samples[0] if full.samples else None
    transcript = trace_dir / "transcript.md"
    _write(transcript, render_transcript(full, sample))
    if sample is None:
        tail = full.error.traceback if full.error else f"the log has no sample (status {full.status})"
        return RolloutResult(task.id, 0.0, False, "infra_error", trace_path=str(transcript), error_tail=tail[-2000:])
    usage = sample.model_usage or {}
    cost = sum(u.total_cost or 0.0 for u in usage.values())
    calls = sum(1 for e in sample.events if type(e).__name__ == "ModelEvent")
    if sample.error is not None:
        tb = sample.error.traceback or sample.error.message
        ours = str(harness_dir) in tb
        return RolloutResult(task.id, 0.0, False, "task_failure" if ours else "infra_error", cost=cost,
                             llm_calls=calls, trace_path=str(transcript), error_tail=tb[-2000:],
                             rationale=f"the solver raised: {sample.error.message[:300]}",
                             failure_file=bench.solver.partition("@")[0] if ours else None)  # fmt: skip
    scores = sample.scores or {}
    name = bench.scorer or next(iter(scores), "")
    if name not in scores:
        return RolloutResult(task.id, 0.0, False, "infra_error", cost=cost, llm_calls=calls, trace_path=str(transcript),
                             error_tail=f"no score {name!r} in the log (scores: {sorted(scores)})")  # fmt: skip
    score = scores[name]
    value = min(1.0, max(0.0, float(value_to_float()(score.value))))
    passed = value >= bench.pass_threshold
    why = "" if passed else (
        f"{name} = {score.value!r}; answer {str(score.answer)[:200]!r}, target {_target(sample)[:200]!r}"
        + (f"; {str(score.explanation)[:400]}" if score.explanation else "")
    )  # fmt: skip
    return RolloutResult(task.id, value, passed, "success" if passed else "task_failure", cost=cost,
                         llm_calls=calls, trace_path=str(transcript), rationale=why)  # fmt: skip


def _target(sample: EvalSample) -> str:
    return sample.target if isinstance(sample.target, str) else " | ".join(sample.target)


def render_transcript(log: EvalLog, sample: EvalSample | None) -> str:
    """The run as markdown: input, target, messages with tool calls, output, scores, error."""
    lines = [f"# Inspect sample {sample.id if sample else '?'} ({log.eval.task}, model {log.eval.model})", ""]
    if sample is None:
        lines += [f"No sample in the log (status {log.status}).", ""]
        if log.error:
            lines += ["```", log.error.traceback[-MAX_TEXT:], "```"]
        return "\n".join(lines) + "\n"
    user_input = sample.input if isinstance(sample.input, str) else "\n".join(m.text for m in sample.input)
    lines += ["## Input", "", user_input[:MAX_TEXT], "", "## Target", "", _target(sample)[:MAX_TEXT], "", "## Messages"]
    for i, message in enumerate(sample.messages, 1):
        lines += ["", f"### {i}. {message.role}", "", message.text[:MAX_TEXT] or "(no text)"]
        for call in getattr(message, "tool_calls", None) or []:
            lines.append(f"- tool call `{call.function}`({_short(call.arguments)})")
        error = getattr(message, "error", None)
        if error is not None:
            lines.append(f"- tool error: {error.message[:MAX_TEXT]}")
    lines += ["", "## Output", "", (sample.output.completion or "(empty)")[:MAX_TEXT], "", "## Scores", ""]
    for name, score in (sample.scores or {}).items():
        lines.append(f"- {name}: value {score.value!r}, answer {str(score.answer)[:500]!r}")
        if score.explanation:
            lines.append(f"  - explanation: {str(score.explanation)[:MAX_TEXT]}")
    if sample.limit is not None:
        lines += ["", f"Limit reached: {sample.limit.type} ({sample.limit.limit})."]
    if sample.error is not None:
        lines += ["", "## Error", "", "```", (sample.error.traceback or sample.error.message)[-MAX_TEXT:], "```"]
    return "\n".join(lines) + "\n"


def _short(arguments: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    return text if len(text) <= 500 else text[:499] + "…"


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def warm_up() -> None:
    """One tiny offline eval in a throw-away log folder: imports what Inspect loads lazily on its first eval."""
    from inspect_ai import Task as InspectTask
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match

    def outputs(*_args: Any) -> ModelOutput:
        out = ModelOutput.from_content(model="mockllm", content="1")
        out.usage = ModelUsage()
        return out

    folder = tempfile.mkdtemp(prefix="saddler-inspect-warm-")
    try:
        task = InspectTask(dataset=[Sample(id="warm", input="1", target="1")], scorer=match(), name="saddler_warm")
        model = get_model("mockllm/model", custom_outputs=outputs, memoize=False)
        inspect_eval(task, model=model, display="none", log_dir=folder, log_level="error")
    finally:
        shutil.rmtree(folder, ignore_errors=True)

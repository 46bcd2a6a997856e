"""The 002 seed's operations on a fleet root: status, view, report, pause, resume, kill.

`status` reads the state the orchestrator last wrote (`.orch-state.json`): initialized, running, paused, finished,
killed; `running` or `paused` with no process holding the run lock is `stopped`, as `saddler status` says of a run.

`kill` ends the orchestrator (pid file), the agent's process tree, and sweeps orphans: any process whose
environment carries `SADDLER_FLEET_ROOT=<this fleet>` (every agent and eval saddler starts is tagged so); it
returns once the run lock is free, so `saddler fleet run` can follow it at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from saddler.control import RunControls
from saddler.errors import RunStateError
from saddler.modes.fleet import results as tsv
from saddler.modes.fleet.agent import FLEET_ENV
from saddler.modes.fleet.config import FleetPaths
from saddler.procs import is_running, pids_with_env, read_pid, stop_process_tree
from saddler.reporting.status import STATE_TEXT, STOPPED

LIVE_STATES = ("running", "paused")
"""What the state file may say only while an orchestrator holds the fleet's run lock."""


def status(paths: FleetPaths) -> dict[str, Any]:
    """Iteration, best metric, results rows, cost, plateau count, run state: from the orchestrator's own rows
    (`results.results_of`); rows of results.tsv it did not write are listed apart (`agent_rows`), never counted."""
    state = paths.read_state()
    rows, foreign = tsv.results_of(paths.db, paths.results)
    direction = paths.spec.problem.metric_direction
    running = controls(paths).running()
    word = state.get("status", "uninitialized")
    if word in LIVE_STATES and not running:
        word = STOPPED  # the orchestrator that wrote it is gone (killed -9, a reboot): as `saddler status` says
    return {
        "fleet": paths.spec.fleet_name, "workdir": str(paths.workdir), "status": word,
        "running": running, "paused": paths.paused.exists(), "iteration": state.get("iteration", 0),
        "max_iterations": paths.spec.stop_when.max_iterations, "direction": direction,
        "baseline_metric": state.get("baseline_metric"), "best_metric": tsv.best_metric(rows, direction),
        "cost_usd": state.get("cost_usd", 0.0), "cost_cap_usd": paths.spec.stop_when.cost_cap_usd,
        "trailing_discards": tsv.trailing_discards(rows), "plateau_threshold": paths.spec.search.plateau_threshold,
        "counts": {s: sum(r.status == s for r in rows) for s in tsv.STATUSES},
        "termination_reason": state.get("termination_reason"),
        "rows": [r.line() for r in rows], "agent_rows": [r.line() for r in foreign],
    }  # fmt: skip


def render_status(info: dict[str, Any]) -> str:
    state = STATE_TEXT.get(info["status"], info["status"])
    lines = [
        f"fleet {info['fleet']}: {state}{' (paused)' if info['paused'] else ''}"
        f"{' running' if info['running'] else ''}",
        f"iteration {info['iteration']}/{info['max_iterations']}  best {info['best_metric']} ({info['direction']})"
        f"  baseline {info['baseline_metric']}",
        f"cost ${info['cost_usd']:.2f}" + (f" / ${info['cost_cap_usd']:.2f}" if info["cost_cap_usd"] else ""),
        f"plateau: {info['trailing_discards']} trailing discard(s), search at {info['plateau_threshold']}",
        f"keep {info['counts']['keep']}  discard {info['counts']['discard']}  crash {info['counts']['crash']}",
        "", tsv.HEADER, *info["rows"][-15:],
    ]  # fmt: skip
    if info["agent_rows"]:
        lines += ["", f"{len(info['agent_rows'])} row(s) of results.tsv not written by saddler (not counted):",
                  *info["agent_rows"][-15:]]  # fmt: skip
    return "\n".join(lines)


def _event_text(obj: dict[str, Any]) -> list[str]:
    kind = obj.get("type", "")
    if kind == "saddler.prompt":
        return [
            f"[prompt] iteration {obj.get('iteration')}{' (search)' if obj.get('search') else ''}: "
            f"{obj.get('prompt_file', '')}"
        ]
    if kind == "saddler.exit":
        tail = str(obj.get("stderr", "")).strip().splitlines()[-1:] or [""]
        return [f"[exit] code {obj.get('returncode')}{' (timed out)' if obj.get('timed_out') else ''} {tail[0]}"]
    if kind == "assistant" and isinstance(obj.get("message"), dict):
        out = []
        for part in obj["message"].get("content") or []:
            if part.get("type") == "text":
                out.append(f"[assistant] {part.get('text', '')}")
            elif part.get("type") == "tool_use":
                out.append(f"[tool] {part.get('name')} {json.dumps(part.get('input', {}), ensure_ascii=False)[:200]}")
        return out
    if kind == "user" and isinstance(obj.get("message"), dict):
        return [
            f"[tool result] {str(p.get('content', ''))[:200]}"
            for p in obj["message"].get("content") or []
            if isinstance(p, dict) and p.get("type") == "tool_result"
        ]
    if kind == "result":
        return [
            f"[result] {obj.get('subtype', '')} turns={obj.get('num_turns', 0)} "
            f"cost=${float(obj.get('total_cost_usd') or 0):.2f}: {str(obj.get('result', ''))[:300]}"
        ]
    if kind == "text":
        return [str(obj.get("text", ""))]
    return [f"[{kind or 'event'}] {json.dumps(obj, ensure_ascii=False)[:200]}"]


def view(paths: FleetPaths, which: str) -> str:
    """The parsed session events of iteration `which` (a number or `latest`)."""
    logs = sorted(paths.logs.glob("session-iter-*.jsonl"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    if not logs:
        raise RunStateError(f"{paths.logs} has no session log yet; start the fleet with `saddler fleet run`")
    if which == "latest":
        path = logs[-1]
    else:
        if not which.isdigit():
            raise RunStateError(f"iteration must be a number or 'latest', not {which!r}")
        path = paths.session_log(int(which))
        if not path.is_file():
            raise RunStateError(
                f"no session log for iteration {which}; iterations logged: "
                f"{', '.join(p.stem.rsplit('-', 1)[1] for p in logs)}"
            )
    out = [f"== {path.name}"]
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            out.append(line)
            continue
        out += _event_text(obj) if isinstance(obj, dict) else [line]
    return "\n".join(out) + "\n"


def follow(
    paths: FleetPaths,
    which: str,
    emit: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 1.0,
    idle_limit: int = 0,
) -> None:
    """Print iteration `which`'s events as they are logged until its `saddler.exit` event, until a poll finds
    nothing new while no orchestrator runs the fleet (the event will never come), or, with `idle_limit`, after
    that many empty polls. Only whole lines are read (an agent may be mid-write); a line that is not JSON is
    printed as it is."""
    view(paths, which)  # the same errors for an unknown iteration
    logs = sorted(paths.logs.glob("session-iter-*.jsonl"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    path = logs[-1] if which == "latest" else paths.session_log(int(which))
    emit(f"== {path.name}")
    offset, idle = 0, 0
    while True:
        with path.open("rb") as fh:
            fh.seek(offset)
            chunk = fh.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]
        offset += len(whole)
        lines = [line for line in whole.decode("utf-8", errors="replace").splitlines() if line.strip()]
        idle = 0 if lines else idle + 1
        for line in lines:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                emit(line)
                continue
            for text in _event_text(obj) if isinstance(obj, dict) else [line]:
                emit(text)
            if isinstance(obj, dict) and obj.get("type") == "saddler.exit":
                return
        if not lines and not controls(paths).running():
            emit("(the fleet is not running: no more events will come)")
            return
        if idle_limit and idle >= idle_limit:
            return
        sleep(poll_s)


def report(paths: FleetPaths) -> str:
    """The Markdown summary of a fleet run."""
    info = status(paths)
    rows, foreign = tsv.results_of(paths.db, paths.results)
    base, best = info["baseline_metric"], info["best_metric"]
    change = "—"
    if base not in (None, 0) and best is not None:
        change = f"{(best - base) / abs(base) * 100:+.1f}%"
    spec = paths.spec
    out = [
        f"# Autoresearch fleet report: {spec.fleet_name}", "",
        f"- Workdir: `{paths.workdir}`", f"- Eval: `{spec.problem.eval_command}` ({spec.problem.metric_direction})",
        f"- Agent: {spec.config.provider} / {spec.config.model} (fallback {spec.config.fallback_model})",
        f"- Status: {info['status']} ({info['termination_reason'] or 'running'})", "",
        "| Metric | Baseline | Best | Change |", "|---|---|---|---|", f"| {spec.problem.metric_direction} | {base} | "
        f"{best} | {change} |", "",
        f"Experiments: {len(rows) - 1 if rows else 0} — keep {info['counts']['keep'] - (1 if rows else 0)}, "
        f"discard {info['counts']['discard']}, crash {info['counts']['crash']}. Cost ${info['cost_usd']:.2f}.", "",
        "## Kept changes", "", "| Commit | Metric | Description |", "|---|---|---|",
    ]  # fmt: skip
    out += [f"| `{r.commit}` | {r.metric:g} | {r.description} |" for r in rows if r.status == "keep"]
    out += ["", "## All experiments", "", "| # | Commit | Metric | Status | Description |", "|---|---|---|---|---|"]
    out += [f"| {i} | `{r.commit}` | {r.metric:g} | {r.status} | {r.description} |" for i, r in enumerate(rows)]
    if foreign:
        out += ["", "## Rows saddler did not write", "",
                "In results.tsv but not measured by the orchestrator (an agent wrote them): never counted.", "",
                "| Commit | Metric | Status | Description |", "|---|---|---|---|"]  # fmt: skip
        out += [f"| `{r.commit}` | {r.metric:g} | {r.status} | {r.description} |" for r in foreign]
    searches = [
        p
        for p in sorted(paths.logs.glob("session-iter-*.jsonl"))
        if '"search": true' in p.read_text(encoding="utf-8").splitlines()[0]
    ]
    out += [
        "",
        f"Search prompts (plateau >= {spec.search.plateau_threshold}): "
        f"{', '.join(p.stem.rsplit('-', 1)[1] for p in searches) or 'none'}",
        "",
    ]
    return "\n".join(out)


def controls(paths: FleetPaths) -> RunControls:
    """The fleet's run controls: the main loop's, with the seed's `.paused` sentinel."""
    return RunControls(paths.root, pause_name=paths.paused.name)


def pause(paths: FleetPaths) -> str:
    controls(paths).request_pause()
    return "pausing at the next iteration boundary (`saddler fleet resume` continues)"


def resume(paths: FleetPaths) -> str:
    control = controls(paths)
    control.clear()
    if control.running():
        return "resumed"
    return f"not running: start it with `saddler fleet run {paths.root}`"


def kill(paths: FleetPaths, grace_s: float = 10.0) -> dict[str, Any]:
    """Force-stop, and return only once the fleet can be run again (`RunControls.kill`: the orchestrator, which
    holds the run lock, gets SIGTERM, then SIGKILL after `grace_s`); then the agent's whole process tree (its
    supervisor ends it; the orchestrator's death ends it too) and every process tagged with this fleet. The
    orchestrator goes first so it never sees its agent die and takes the half-done experiment for a finished one."""
    pid = read_pid(paths.agent_pid)
    agent = pid if pid and is_running(pid) else None  # reported as killed however it ends: by this clean-up, or
    # by the orchestrator's own shutdown, which may end it before the clean-up looks

    def agent_and_orphans() -> list[int]:
        if agent and is_running(agent):
            stop_process_tree(agent, grace_s=2.0)
        return ([agent] if agent else []) + _sweep(paths)

    killed = controls(paths).kill(grace_s, then=agent_and_orphans, pid=read_pid(paths.pid))
    paths.pid.unlink(missing_ok=True)
    paths.agent_pid.unlink(missing_ok=True)
    paths.write_state(status="killed", termination_reason="killed", pid=None)
    return {"killed": sorted(set(killed))}


def _sweep(paths: FleetPaths) -> list[int]:
    """SIGKILL every process tagged `SADDLER_FLEET_ROOT=<this fleet>` (agents and evals that escaped)."""
    killed = []
    for pid in pids_with_env(f"{FLEET_ENV}={paths.root}"):
        if pid != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed

"""One fleet agent session: the prompt (normal, or the search variant on a plateau), the provider's command,
the run (stdin closed, own process group, timeout, its whole process tree ended with it) and the per-iteration
session log `logs/session-iter-N.jsonl`.

`config.budget_per_iter`, `config.max_turns` and `config.fallback_model` reach each provider as far as its CLI
allows (`provider_notes` says how): claude takes all three as flags. codex exec and pi have no such options, so
saddler stops a session itself once its streamed JSON reports `max_turns` turns or `budget_per_iter` dollars (pi
reports cost per message; codex reports tokens only, and one turn per exec), and retries a failed session that
changed nothing once with `fallback_model`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saddler.errors import BackendError
from saddler.modes.fleet.config import AgentConfig, FleetPaths
from saddler.procs import run_process_group

PRESETS = {
    "claude": "claude -p --output-format stream-json --verbose --model {model} --fallback-model {fallback_model} "
              "--max-budget-usd {budget} --permission-mode acceptEdits "
              "--allowedTools Bash,Read,Edit,Write,Glob,Grep,WebSearch,WebFetch{max_turns_flag} -- {prompt}",
    "codex": "codex exec --json --sandbox workspace-write --skip-git-repo-check --model {model} {prompt}",
    "pi": "pi -p --mode json --model {model} {prompt}",
}  # fmt: skip
FLEET_ENV = "SADDLER_FLEET_ROOT"
_DESCRIPTION = re.compile(r"^\s*DESCRIPTION:\s*(.+?)\s*$", re.MULTILINE)
PROMPT = """You are experiment {iteration} of the autoresearch fleet "{name}".
Goal: {direction} the metric printed by `{eval_command}` (fixed eval harness: never edit it).
Protected (the eval harness; any change to them is a crash and is reset): {protected}.
Make ONE focused change to the code in this directory, then stop. The orchestrator commits your change, runs the
eval itself, keeps the commit when the metric improves and runs `git reset --hard` otherwise, and appends the row
to {results_file} (commit, metric, status, description). Do not edit {results_file}. Simplicity matters: a tiny
gain is not worth ugly complexity. End your answer with a line `DESCRIPTION: <what you changed, one line>`.
{search}
<program.md>
{program}
</program.md>

<{results_file} last rows>
{history}
</{results_file}>
"""
SEARCH = """
PLATEAU: the last {discards} experiments were discarded (counted by the orchestrator, not by you). Before
writing any code, use WebSearch to look for techniques, papers or known algorithms that have not been tried
yet (see {results_file}), then make ONE change based on what you found.
"""


NOTES = {
    "codex": "codex exec has no budget, turn-limit or fallback-model option: saddler stops a session at "
    "config.max_turns turns (codex reports one per exec), config.budget_per_iter is ignored (codex reports "
    "tokens, not dollars), and a failed session is retried once with config.fallback_model",
    "pi": "pi has no budget, turn-limit or fallback-model option: saddler stops a session when its streamed "
    "cost passes config.budget_per_iter or its turns pass config.max_turns, and retries a failed session "
    "once with config.fallback_model",
    "command": "config.command is run as written: budget_per_iter, max_turns and fallback_model reach it only "
    "through its {budget}, {max_turns} and {fallback_model} placeholders; saddler still stops a session whose "
    "JSON output reports more turns or dollars than allowed",
}


def provider_notes(cfg: AgentConfig) -> list[str]:
    """How budget_per_iter, max_turns and fallback_model reach this agent (nothing to say for claude)."""
    if cfg.command:
        return [NOTES["command"]]
    return [NOTES[cfg.provider]] if cfg.provider in NOTES else []


def retries_with_fallback(cfg: AgentConfig) -> bool:
    """True when saddler, not the CLI, falls back to `fallback_model` (codex, pi)."""
    return bool(cfg.fallback_model) and not cfg.command and cfg.provider in ("codex", "pi")


@dataclass
class SessionRun:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    log_path: Path
    stopped: str = ""  # why saddler stopped it early ("max_turns", "budget_per_iter"), else ""


def build_prompt(paths: FleetPaths, iteration: int, discards: int, search: bool, history: list[str]) -> str:
    spec = paths.spec
    program_path = paths.program_md()
    program = program_path.read_text(encoding="utf-8") if program_path else "(no program.md)"
    return PROMPT.format(
        iteration=iteration, name=spec.fleet_name, direction=spec.problem.metric_direction,
        eval_command=spec.problem.eval_command, results_file=spec.problem.results_file,
        protected=", ".join(paths.protected) or "nothing named",
        search=SEARCH.format(discards=discards, results_file=spec.problem.results_file) if search else "",
        program=program.strip(), history="\n".join(history[-20:]) or "(no experiments yet)",
    )  # fmt: skip


def agent_argv(paths: FleetPaths, prompt: str, prompt_file: Path, model: str | None = None) -> list[str]:
    """The agent's argv: `config.command` when set, else the provider preset (`model` overrides config.model)."""
    from saddler.agentcli import build_argv

    cfg = paths.spec.config
    template = cfg.command or PRESETS[cfg.provider]
    values = {
        "prompt": prompt,
        "prompt_file": str(prompt_file),
        "model": model or cfg.model,
        "fallback_model": cfg.fallback_model,
        "budget": f"{cfg.budget_per_iter:g}",
        "max_turns": str(cfg.max_turns),
        "max_turns_flag": "",
    }
    argv = build_argv(template.replace("{max_turns_flag}", ""), values)
    if cfg.max_turns and not cfg.command and cfg.provider == "claude":
        argv[argv.index("--") : argv.index("--")] = ["--max-turns", str(cfg.max_turns)]
    return argv


def _log_line(fh: Any, obj: dict[str, Any]) -> None:
    fh.write(json.dumps(obj, ensure_ascii=False) + "\n")


class _Limits:
    """Watches a session's JSON lines; stops the session (SIGTERM to its supervisor: the whole tree ends) once
    they report `max_turns` turns or `budget` dollars (0 = no limit)."""

    def __init__(self, max_turns: int, budget: float) -> None:
        self.max_turns, self.budget = max_turns, budget
        self.turns, self.cost, self.stopped, self.pid = 0, 0.0, "", 0

    def see(self, line: str) -> None:
        from saddler.agentcli import parse_usage

        if self.stopped or not line.startswith("{"):
            return
        usage = parse_usage(line)
        self.turns += usage["turns"]
        self.cost += usage["cost_usd"]
        if self.max_turns and self.turns >= self.max_turns:
            self.stopped = "max_turns"
        elif self.budget and self.cost >= self.budget:
            self.stopped = "budget_per_iter"
        if self.stopped and self.pid:
            os.kill(self.pid, signal.SIGTERM)


def run_session(
    paths: FleetPaths, iteration: int, prompt: str, search: bool, model: str | None = None, append: bool = False
) -> SessionRun:
    """Run the agent in the workdir; every output line lands in the session log (JSON lines kept as they are).
    `model` overrides config.model (the fallback retry, whose lines are appended to the same log)."""
    paths.logs.mkdir(parents=True, exist_ok=True)
    prompt_file = paths.logs / f"prompt-iter-{iteration}.md"
    prompt_file.write_text(prompt, encoding="utf-8")
    argv = agent_argv(paths, prompt, prompt_file, model)
    if shutil.which(argv[0]) is None:
        raise BackendError(f"agent CLI {argv[0]!r} not found on PATH; install it or set config.command in fleet.json")
    env = {
        **os.environ,
        FLEET_ENV: str(paths.root),
        "SADDLER_PROMPT_FILE": str(prompt_file),
        "SADDLER_ITERATION": str(iteration),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    cfg = paths.spec.config
    limits = _Limits(cfg.max_turns, cfg.budget_per_iter)
    log = paths.session_log(iteration)
    with log.open("a" if append else "w", encoding="utf-8") as fh:
        _log_line(
            fh,
            {
                "type": "saddler.prompt",
                "iteration": iteration,
                "search": search,
                "model": model or cfg.model,
                "argv": [*argv[:-1], "<prompt>"],
                "prompt_file": str(prompt_file),
            },
        )
        fh.flush()

        def on_line(line: str) -> None:
            """Copy the agent's stdout into the session log as it arrives (so `view --follow` can watch it)."""
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                obj = None
            _log_line(fh, obj if isinstance(obj, dict) else {"type": "text", "text": line})
            fh.flush()
            limits.see(line)

        def on_start(pid: int) -> None:
            limits.pid = pid
            paths.agent_pid.write_text(str(pid), encoding="utf-8")

        try:
            run = run_process_group(
                argv,
                cwd=paths.workdir,
                env=env,
                timeout_s=cfg.timeout_s,
                on_line=on_line,
                on_start=on_start,
            )
        finally:
            paths.agent_pid.unlink(missing_ok=True)
        _log_line(
            fh,
            {
                "type": "saddler.exit",
                "returncode": run.returncode,
                "timed_out": run.timed_out,
                "stopped": limits.stopped,
                "stderr": run.stderr[-4000:],
            },
        )
    return SessionRun(
        run.returncode, run.stdout.rstrip("\n"), run.stderr, run.timed_out, run.duration_s, log, limits.stopped
    )


def _texts(stdout: str) -> list[str]:
    """The agent's prose: `result` and assistant text parts of JSON events, plain lines as they are."""
    out: list[str] = []
    for line in stdout.splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            out.append(line)
            continue
        if not isinstance(obj, dict):
            continue
        if isinstance(obj.get("result"), str):
            out.append(obj["result"])
        message = obj.get("message")
        if isinstance(message, dict):
            content = message.get("content")
            parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
            out += [str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"]
        if isinstance(obj.get("item"), dict) and isinstance(obj["item"].get("text"), str):  # codex exec --json
            out.append(obj["item"]["text"])
    return out


def description(stdout: str) -> str:
    """The agent's last `DESCRIPTION:` line (plain or inside its JSON events), or ''."""
    matches = _DESCRIPTION.findall("\n".join(_texts(stdout)))
    return " ".join(matches[-1].replace("\t", " ").split())[:200] if matches else ""

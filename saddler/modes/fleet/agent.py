"""One fleet agent session: the prompt (normal, or the search variant on a plateau), the provider's command,
the run (own process group, timeout, its whole process tree ended with it) and the per-iteration session log
`logs/session-iter-N.jsonl`.

What saddler knows of each CLI has one home, `saddler.sessions.presets` (the optimizer's sessions use it too): the
provider's command is its preset's `fleet` template, which passes the prompt by file (`< {prompt_file}`, pi's
`@{prompt_file}`: Linux refuses one argv element over 128 KiB, and program.md alone may be larger), the preset's
environment, the output parsers of `saddler.agentcli` (usage, the final message the DESCRIPTION line is read
from) and the failure reading of `saddler.sessions.failures` (pi's API errors behind exit 0, a rejected key, a
sandbox that cannot start, a usage limit).

`config.budget_per_iter`, `config.max_turns` and `config.fallback_model` reach each provider as far as its CLI
allows (`provider_notes` says how, from the preset's `fleet_note`): claude takes all three as flags. codex exec and
pi have no such options, so saddler stops a session itself once its streamed JSON reports `max_turns` turns or
`budget_per_iter` dollars (pi reports cost per message; codex reports tokens only), and retries a failed session
that changed nothing once with `fallback_model`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saddler.agentcli import Usage, final_message
from saddler.errors import AuthenticationError, BackendError, ConfigError
from saddler.modes.fleet.config import AgentConfig, FleetPaths
from saddler.procs import run_process_group
from saddler.sessions.command import ARG_LIMIT, by_reference, sandbox_fault
from saddler.sessions.failures import CLIFailure, read_failure
from saddler.sessions.presets import FLEET_PLACEHOLDERS, PRESETS, command_argv, placeholders_in

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


COMMAND_NOTE = (
    "config.command is run as written: budget_per_iter, max_turns and fallback_model reach it only "
    "through its {budget}, {max_turns} and {fallback_model} placeholders; saddler still stops a session whose "
    "JSON output reports more turns or dollars than allowed"
)


def provider_notes(cfg: AgentConfig) -> list[str]:
    """How budget_per_iter, max_turns and fallback_model reach this agent (nothing to say for claude)."""
    if cfg.command:
        return [COMMAND_NOTE]
    note = PRESETS[cfg.provider].fleet_note
    return [note] if note else []


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
    failure: CLIFailure | None = None  # what the CLI reported as failed (its API, its key, its sandbox), or None

    @property
    def failed(self) -> bool:
        """It ended without doing its work: a non-zero exit or a reported failure (not a stop by saddler)."""
        return not self.stopped and (self.returncode not in (0, None) or self.failure is not None)

    @property
    def outcome(self) -> str:
        if self.timed_out:
            return "timeout"
        if self.stopped:
            return f"stopped:{self.stopped}"
        if self.failure is not None:
            return f"failed:{self.failure.kind}"
        return f"exit_{self.returncode}"


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


def agent_argv(
    paths: FleetPaths, prompt: str, prompt_file: Path, model: str | None = None
) -> tuple[list[str], str | None]:
    """The agent's argv and the file fed on its stdin (or None): `config.command` when set, else the provider
    preset's `fleet` template (`model` overrides config.model). The prompt goes to `prompt_file` (written by the
    caller); a custom command's `{prompt}` longer than one argv element may be becomes a pointer to that file."""
    cfg = paths.spec.config
    template = cfg.command or PRESETS[cfg.provider].fleet
    unknown = placeholders_in(template) - set(FLEET_PLACEHOLDERS)
    if unknown:
        raise ConfigError(
            f"config.command: unknown placeholder(s) {', '.join(sorted('{' + u + '}' for u in unknown))}; "
            f"available: {', '.join('{' + p + '}' for p in FLEET_PLACEHOLDERS)}"
        )
    model = model or cfg.model
    values = {
        "prompt": prompt if len(prompt.encode("utf-8")) <= ARG_LIMIT else by_reference(prompt_file),
        "prompt_file": str(prompt_file),
        "model": model,
        "fallback_model": cfg.fallback_model if cfg.fallback_model != model else "",
        "budget": f"{cfg.budget_per_iter:g}" if cfg.budget_per_iter else "",
        "max_turns": str(cfg.max_turns) if cfg.max_turns else "",
    }
    return command_argv(template, values)


def shown_argv(argv: list[str], prompt: str) -> list[str]:
    """`argv` for the session log and `--dry-run`: a prompt passed inline shown as `<prompt>`."""
    return ["<prompt>" if a == prompt else a for a in argv]


def _log_line(fh: Any, obj: dict[str, Any]) -> None:
    fh.write(json.dumps(obj, ensure_ascii=False) + "\n")


class _Limits:
    """Watches a session's JSON lines; stops the session (SIGTERM to its supervisor: the whole tree ends) once
    they report `max_turns` turns or `budget` dollars (0 = no limit)."""

    def __init__(self, max_turns: int, budget: float) -> None:
        self.max_turns, self.budget = max_turns, budget
        self.usage, self.stopped, self.pid = Usage(), "", 0

    def see(self, line: str) -> None:
        if self.stopped:
            return
        self.usage.feed_line(line)
        if self.max_turns and self.usage.running_turns >= self.max_turns:
            self.stopped = "max_turns"
        elif self.budget and self.usage.cost_usd >= self.budget:
            self.stopped = "budget_per_iter"
        if self.stopped and self.pid:
            os.kill(self.pid, signal.SIGTERM)


def run_session(
    paths: FleetPaths, iteration: int, prompt: str, search: bool, model: str | None = None, append: bool = False
) -> SessionRun:
    """Run the agent in the workdir; every output line lands in the session log (JSON lines kept as they are).
    `model` overrides config.model (the fallback retry, whose lines are appended to the same log). A rejected key,
    a sandbox that cannot start or a used-up plan stop the run (nothing else would work); an API error is a failed
    session (`SessionRun.failure`)."""
    paths.logs.mkdir(parents=True, exist_ok=True)
    prompt_file = paths.logs / f"prompt-iter-{iteration}.md"
    prompt_file.write_text(prompt, encoding="utf-8")
    argv, stdin_file = agent_argv(paths, prompt, prompt_file, model)
    if shutil.which(argv[0]) is None:
        raise BackendError(f"agent CLI {argv[0]!r} not found on PATH; install it or set config.command in fleet.json")
    cfg = paths.spec.config
    preset = None if cfg.command else PRESETS[cfg.provider]
    env = {
        **os.environ,
        FLEET_ENV: str(paths.root),
        "SADDLER_PROMPT_FILE": str(prompt_file),
        "SADDLER_ITERATION": str(iteration),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env = preset.environment(env) if preset is not None else env
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
                "argv": shown_argv(argv, prompt),
                "stdin": stdin_file,
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

        stdin = Path(stdin_file).read_text(encoding="utf-8") if stdin_file else None
        try:
            run = run_process_group(
                argv,
                cwd=paths.workdir,
                env=env,
                timeout_s=cfg.timeout_s,
                on_line=on_line,
                on_start=on_start,
                stdin_text=stdin,
            )
        finally:
            paths.agent_pid.unlink(missing_ok=True)
        failure = None if run.timed_out or limits.stopped else read_failure(
            run.stdout, run.stderr, run.returncode, dt.datetime.now().astimezone()
        )  # fmt: skip
        _log_line(
            fh,
            {
                "type": "saddler.exit",
                "returncode": run.returncode,
                "timed_out": run.timed_out,
                "stopped": limits.stopped,
                "failure": None if failure is None else {"kind": failure.kind, "message": failure.message},
                "stderr": run.stderr[-4000:],
            },
        )
    _stop_on(failure, argv[0], preset, cfg)
    return SessionRun(
        run.returncode, run.stdout.rstrip("\n"), run.stderr, run.timed_out, run.duration_s, log, limits.stopped,
        failure,
    )  # fmt: skip


def _stop_on(failure: CLIFailure | None, program: str, preset: Any, cfg: AgentConfig) -> None:
    """Raise for a failure no later session can get past: a rejected key, a sandbox that cannot start, a used-up
    plan (the run resumes with `saddler fleet run` once it is fixed or the window opened)."""
    if failure is None:
        return
    if failure.kind == "auth":
        keys = " or ".join(preset.key_variables) if preset is not None else "the agent's API key"
        raise AuthenticationError(
            f"the agent CLI {program!r} was refused authentication ({failure.message[:200]}): set {keys} "
            "(or log the CLI in), then run `saddler fleet run` again"
        )
    if failure.kind == "sandbox":
        raise BackendError(sandbox_fault(program, failure.message, preset))
    if failure.kind == "usage_limit":
        when = (
            f" (it resets at {dt.datetime.fromtimestamp(failure.resets_at).astimezone():%H:%M})"
            if failure.resets_at
            else ""
        )
        raise BackendError(
            f"the agent's plan is out of usage{when}: {failure.message[:200]}; run `saddler fleet run` again then"
        )


def description(stdout: str) -> str:
    """The agent's last `DESCRIPTION:` line in its final message (`agentcli.final_message`), or ''."""
    final = final_message(stdout)
    matches = _DESCRIPTION.findall(final if isinstance(final, str) else json.dumps(final))
    return " ".join(matches[-1].replace("\t", " ").split())[:200] if matches else ""

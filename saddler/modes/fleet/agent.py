"""One fleet agent session: the prompt (normal, or the search variant on a plateau), the provider's command,
the run (stdin closed, own process group, timeout) and the per-iteration session log `logs/session-iter-N.jsonl`."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saddler.errors import BackendError
from saddler.modes.fleet.config import FleetPaths
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


@dataclass
class SessionRun:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    log_path: Path


def build_prompt(paths: FleetPaths, iteration: int, discards: int, search: bool, history: list[str]) -> str:
    spec = paths.spec
    program_path = paths.program_md()
    program = program_path.read_text(encoding="utf-8") if program_path else "(no program.md)"
    return PROMPT.format(
        iteration=iteration, name=spec.fleet_name, direction=spec.problem.metric_direction,
        eval_command=spec.problem.eval_command, results_file=spec.problem.results_file,
        search=SEARCH.format(discards=discards, results_file=spec.problem.results_file) if search else "",
        program=program.strip(), history="\n".join(history[-20:]) or "(no experiments yet)",
    )  # fmt: skip


def agent_argv(paths: FleetPaths, prompt: str, prompt_file: Path) -> list[str]:
    """The agent's argv: `config.command` when set, else the provider preset."""
    from saddler.agentcli import build_argv

    cfg = paths.spec.config
    template = cfg.command or PRESETS[cfg.provider]
    values = {
        "prompt": prompt,
        "prompt_file": str(prompt_file),
        "model": cfg.model,
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


def run_session(paths: FleetPaths, iteration: int, prompt: str, search: bool) -> SessionRun:
    """Run the agent in the workdir; every output line lands in the session log (JSON lines kept as they are)."""
    paths.logs.mkdir(parents=True, exist_ok=True)
    prompt_file = paths.logs / f"prompt-iter-{iteration}.md"
    prompt_file.write_text(prompt, encoding="utf-8")
    argv = agent_argv(paths, prompt, prompt_file)
    if shutil.which(argv[0]) is None:
        raise BackendError(f"agent CLI {argv[0]!r} not found on PATH; install it or set config.command in fleet.json")
    env = {
        **os.environ,
        FLEET_ENV: str(paths.root),
        "SADDLER_PROMPT_FILE": str(prompt_file),
        "SADDLER_ITERATION": str(iteration),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    log = paths.session_log(iteration)
    with log.open("w", encoding="utf-8") as fh:
        _log_line(
            fh,
            {
                "type": "saddler.prompt",
                "iteration": iteration,
                "search": search,
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

        def on_start(pid: int) -> None:
            paths.agent_pid.write_text(str(pid), encoding="utf-8")

        try:
            run = run_process_group(
                argv,
                cwd=paths.workdir,
                env=env,
                timeout_s=paths.spec.config.timeout_s,
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
                "stderr": run.stderr[-4000:],
            },
        )
    return SessionRun(run.returncode, run.stdout.rstrip("\n"), run.stderr, run.timed_out, run.duration_s, log)


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

"""The `command` backend: any CLI coding agent runs each session from a command template.

`sessions.command` is a preset name (`claude`, `codex`, `pi`) or a template whose `{placeholders}` are
filled per argument (a filled argument stays one argv element): `{prompt}`, `{prompt_file}`,
`{result_file}`, `{system_prompt}`, `{model}`, `{max_turns}`, `{budget}`, `{cwd}`, `{run_dir}`,
`{allowed_tools}`, `{settings}`. The agent runs in the candidate's worktree (diagnosis) or the run folder,
with stdin closed and a timeout; its answer is read from the result file the prompt names (falling back to JSON in its
output); usage and cost are parsed from its output where it reports them; the worktree's diff is the patch.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saddler.agentcli import build_argv, parse_usage
from saddler.errors import AuthenticationError, BackendError, ConfigError
from saddler.procs import ProcessRun, run_process_group
from saddler.sessions import common, guard
from saddler.sessions.prompts import render, render_system
from saddler.sessions.schema import (
    DiagnosisRequest,
    Role,
    SessionStats,
)

if TYPE_CHECKING:
    from saddler.benchmark import Benchmark
    from saddler.config import SessionConfig


@dataclass(frozen=True)
class Preset:
    """A known CLI agent: its template and the variable holding its credentials."""

    template: str
    key_variable: str


PRESETS: dict[str, Preset] = {
    "claude": Preset(
        "claude -p --output-format json --model {model} --max-turns {max_turns} --max-budget-usd {budget} "
        "--setting-sources '' --settings {settings} --permission-mode dontAsk --add-dir {run_dir} "
        "--allowedTools {allowed_tools} "
        "--system-prompt {system_prompt} -- {prompt}",
        "ANTHROPIC_API_KEY",
    ),
    "codex": Preset("codex exec --json --sandbox workspace-write --skip-git-repo-check {prompt}", "OPENAI_API_KEY"),
    "pi": Preset("pi --mode json --no-session --system-prompt {system_prompt} -- {prompt}", "ANTHROPIC_API_KEY"),
}
PLACEHOLDERS = (
    "prompt", "prompt_file", "result_file", "system_prompt", "model", "max_turns", "budget", "cwd",
    "allowed_tools", "settings", "run_dir",
)  # fmt: skip
_AUTH = re.compile(
    r"invalid api key|invalid x-api-key|authentication[_ ]?(?:failed|error)|unauthorized|\b401\b|not logged in|"
    r"please run /login|api key (?:is )?(?:missing|not set|required)|incorrect api key|missing api key",
    re.IGNORECASE,
)
_TRANSIENT = re.compile(r"rate.?limit|overloaded|\b429\b|\b529\b|\b503\b|econnreset|temporarily unavailable", re.I)
_FAILED_SUBTYPES = {"error_max_turns": "max_turns", "error_max_budget_usd": "budget"}


def resolve_command(config: SessionConfig) -> tuple[str, str]:
    """`(template, key_variable)` for `sessions.command`: a preset or a custom template."""
    spec = config.command.strip()
    if not spec:
        raise ConfigError("sessions.command is empty: set a preset (claude, codex, pi) or a command template")
    if spec in PRESETS:
        return PRESETS[spec].template, PRESETS[spec].key_variable
    executable = Path(shlex.split(spec)[0]).name
    key = next((p.key_variable for name, p in PRESETS.items() if executable == name), "the agent's API key variable")
    return spec, key


class CommandBackend(common.LLMSessionBackend):
    """Optimizer sessions run by an external CLI coding agent (see module docstring).

    The agent runs in its own process group with stdin closed; the whole group is killed on timeout.
    The claude preset also gets a PreToolUse command hook (`python -m saddler.sessions.guard`) that
    refuses edits of protected paths or outside the worktree. `sleep` and `clock` are injectable.
    """

    name = "command"

    def __init__(
        self,
        config: SessionConfig,
        *,
        benchmark: Benchmark | None = None,
        run_dir: Path,
        seed: int,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(config, benchmark=benchmark, run_dir=run_dir, seed=seed, sleep=sleep, clock=clock)
        self.template, self.key_variable = resolve_command(config)
        self.last_argv: list[str] = []

    def web_search(self, role: Role, request: common.Request) -> bool:
        """Whether the exploration diagnosis may search the web: allowed by the config, and the template
        hands the agent saddler's tool list (`{allowed_tools}`), so the search tools can be granted."""
        return (
            role == "diagnosis_patch"
            and getattr(request, "exploration", False)
            and self.config.allow_web_search_on_plateau
            and "{allowed_tools}" in self.template
        )

    def argv_for(
        self, role: Role, request: common.Request, prompt: str, prompt_file: Path, result_file: Path
    ) -> list[str]:
        """The agent's argv for one session."""
        worktree = Path(request.worktree) if isinstance(request, DiagnosisRequest) else None
        check = (request.check_command if isinstance(request, DiagnosisRequest) else "") or self.config.check_command
        prefixes = guard.allowed_bash_prefixes(check)
        protected = request.component_globs.get("protected", []) if isinstance(request, DiagnosisRequest) else []
        guard_spec = {"worktree": str(worktree) if worktree else "", "protected": protected, "bash": prefixes,
                      "writable": [str(result_file)]}  # fmt: skip
        hook = shlex.join([sys.executable, "-m", "saddler.sessions.guard", json.dumps(guard_spec)])
        settings = {"hooks": {"PreToolUse": [{"matcher": "", "hooks": [{"type": "command", "command": hook}]}]}}
        tools = ["Read", "Glob", "Grep", "Edit", "Write", *(f"Bash({p}:*)" for p in prefixes)]
        if self.web_search(role, request):
            tools += ["WebSearch", "WebFetch"]
        values = {
            "prompt": prompt,
            "prompt_file": str(prompt_file),
            "result_file": str(result_file),
            "system_prompt": render_system(role, self.config.prompts, self.run_dir),
            "model": self.config.model,
            "max_turns": str(self.config.max_turns),
            "budget": f"{self.config.max_budget_usd:g}",
            "cwd": str(worktree or self.run_dir),
            "allowed_tools": ",".join(tools),
            "settings": json.dumps(settings),
            "run_dir": str(self.run_dir),
        }
        assert set(values) == set(PLACEHOLDERS)
        return build_argv(self.template, values)

    def _session(self, role: Role, request: common.Request) -> common.Result:
        transcript_file = common.transcript_path(self.run_dir, request.iteration, role, request.attempt)
        base = transcript_file.with_suffix("")
        prompt_file, result_file = Path(f"{base}.prompt.md"), Path(f"{base}.result.json")
        web = self.web_search(role, request)
        prompt = render(
            role, request, self.config.prompts, result_file=str(result_file), web_search=web, base_dir=self.run_dir
        )
        prompt_file.write_text(prompt, encoding="utf-8")
        argv = self.argv_for(role, request, prompt, prompt_file, result_file)
        self.last_argv = argv
        if shutil.which(argv[0]) is None:
            raise BackendError(f"agent CLI {argv[0]!r} not found on PATH; install it or fix sessions.command")
        cwd = Path(request.worktree) if isinstance(request, DiagnosisRequest) else self.run_dir
        transcript = common.Transcript(transcript_file)
        transcript.write("prompt", role=role, text=prompt, argv=[*argv[:-1], "<prompt>"] if argv else [])
        stats = SessionStats(backend=self.name, model=self.config.model, transcript_path=str(transcript_file))
        started = self.clock()

        def attempt(n: int) -> common.Result:
            result_file.unlink(missing_ok=True)
            transcript.write("attempt", number=n)
            run = self._run(argv, cwd, prompt_file, result_file, request.db_path)
            for line in run.stdout.splitlines():
                transcript.write("stdout", line=line)
            transcript.write("exit", returncode=run.returncode, timed_out=run.timed_out, stderr=run.stderr[-4000:])
            return self._conclude(role, request, run, result_file, stats)

        result = self._with_retries(role, request, stats, transcript, attempt)
        result.stats.duration_s = round(self.clock() - started, 3)
        transcript.write("outcome", outcome=result.stats.outcome, cost_usd=result.stats.cost_usd)
        return result

    def _run(self, argv: list[str], cwd: Path, prompt_file: Path, result_file: Path, db_path: str) -> ProcessRun:
        bin_dir = str(Path(sys.executable).parent)
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "SADDLER_PROMPT_FILE": str(prompt_file),
            "SADDLER_RESULT_FILE": str(result_file),
            "EVODAG_DB": db_path,
        }
        return run_process_group(argv, cwd=cwd, env=env, timeout_s=self.config.timeout_s)

    def _conclude(
        self, role: Role, request: common.Request, run: ProcessRun, result_file: Path, stats: SessionStats
    ) -> common.Result:
        usage = parse_usage(run.stdout)
        stats.turns += usage["turns"]
        stats.tokens_in += usage["tokens_in"]
        stats.tokens_out += usage["tokens_out"]
        stats.cost_usd = round(stats.cost_usd + usage["cost_usd"], 6)
        final = usage["final"] or {}
        if run.timed_out:
            return common.failed_result(role, request, stats, "timeout")
        if final.get("subtype") in _FAILED_SUBTYPES:
            return common.failed_result(role, request, stats, _FAILED_SUBTYPES[final["subtype"]])
        output = f"{run.stdout[-8000:]}\n{run.stderr[-8000:]}"
        if run.returncode != 0 or final.get("is_error"):
            if _AUTH.search(output):
                raise AuthenticationError(
                    f"the agent CLI {self.last_argv[0]!r} was refused authentication: set {self.key_variable} "
                    "(or log the CLI in), then resume the run"
                )
            if _TRANSIENT.search(output):
                raise common.TransientError(f"agent exited {run.returncode}: {run.stderr.strip()[-300:]}")
            if not result_file.is_file():
                stats.error = (run.stderr.strip() or run.stdout.strip())[-500:]
                return common.failed_result(role, request, stats, f"exit_{run.returncode}")
        if result_file.is_file():
            payload: Any = result_file.read_text(encoding="utf-8")
        else:
            payload = final.get("structured_output") or final.get("result") or run.stdout
        try:
            return common.parse_result(role, payload, stats)
        except common.OutputError as exc:
            stats.error = str(exc)
            return common.failed_result(role, request, stats, "unparsable_output")

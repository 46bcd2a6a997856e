"""The `command` backend: any CLI coding agent runs each session from a command template.

`sessions.command` is a preset name (`claude`, `codex`, `pi`: `saddler.sessions.presets`) or a template in the
same language (placeholders in `presets.PLACEHOLDERS`; README "Session backends" documents each). The agent runs
in the candidate's worktree (diagnosis) or the run folder, in its own process group, with a per-role timeout;
the prompt reaches it by file or stdin. Its answer is the CLI's structured output, the file `{result_file}` (the
CLI's `-o`, or the agent's own write when the template does not use `{result_file}`), or its final message.
Usage and cost are parsed from its output where it reports them; the worktree's diff is the patch.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saddler.agentcli import final_message, parse_usage
from saddler.errors import AuthenticationError, BackendError, ConfigError
from saddler.procs import ProcessRun, run_process_group
from saddler.sessions import answers, confine, guard, installs, llm_backend
from saddler.sessions.failures import read_failure
from saddler.sessions.presets import (
    PLACEHOLDERS,
    Preset,
    answer_channel,
    command_argv,
    drop_nulls,
    falls_back_to_own_sandbox,
    placeholders_in,
    preset_of,
    resolve_command,
    sandbox_of,
    strict_schema,
    toml_string,
)
from saddler.sessions.prompts import render, render_system
from saddler.sessions.schema import DiagnosisRequest, Role, SessionStats, result_schema

if TYPE_CHECKING:
    from saddler.benchmark import Benchmark
    from saddler.config import SessionConfig

ARG_LIMIT = 100_000  # bytes; Linux refuses one argv element over 128 KiB (MAX_ARG_STRLEN)
_FAILED_SUBTYPES = {  # claude's result subtypes that end a session without an answer, and the reason recorded
    "error_max_turns": "max_turns",
    "error_max_budget_usd": "budget",
    "error_max_structured_output_retries": "unparsable_output",  # its answers kept failing the schema
}


class CommandBackend(llm_backend.LLMSessionBackend):
    """Optimizer sessions run by an external CLI coding agent (see module docstring).

    Claude-style templates (`{settings}`) get saddler's PreToolUse guard as a command hook; pi runs inside
    bubblewrap (`sessions.sandbox`); codex uses its own sandbox, read-only outside diagnosis, inside that
    bubblewrap too under `auto` (its sandbox does not hide held-out files). `sleep` and `clock` are injectable.
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
        self.preset = preset_of(config)
        self.channel = answer_channel(self.template, self.preset)
        self.sandbox = sandbox_of(config)
        self.unsealed = ""  # why held-out files of the run folder are readable to the agent ("": they are not)
        if self.sandbox == "bwrap" and falls_back_to_own_sandbox(config):
            ok, why = confine.bwrap_works()
            if not ok:
                self.sandbox = "none"
                self.unsealed = unsealed_reason(self.preset.name if self.preset else "the agent", why)
        unknown = placeholders_in(self.template) - set(PLACEHOLDERS)
        if unknown:
            raise ConfigError(
                f"sessions.command: unknown placeholder(s) {', '.join(sorted('{' + u + '}' for u in unknown))}; "
                f"available: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
            )
        if self.preset is not None:
            llm_backend.check_efforts(config, self.preset.efforts, self.preset.name)
        self.last_argv: list[str] = []
        self.last_stdin: str | None = None
        self.last_program = ""

    # -- what the agent is given --------------------------------------------------------------

    def web_search(self, role: Role, request: answers.Request) -> bool:
        """Whether the exploration diagnosis may search the web: allowed by the config, and the template
        hands the agent saddler's tool list (`{allowed_tools}`), so the search tools can be granted."""
        return (
            role == "diagnosis_patch"
            and getattr(request, "exploration", False)
            and self.config.allow_web_search_on_plateau
            and bool(placeholders_in(self.template) & {"allowed_tools", "codex_web_search"})
        )

    def tool_limits(self, role: Role, request: answers.Request) -> str:
        """What the agent may touch, stated up front in its prompt (true for this template and sandbox)."""
        editing = role == "diagnosis_patch"
        if "{settings}" in self.template:
            return guard.describe_limits(editing, self.policy(request), web=self.web_search(role, request))
        where = "the worktree (your working directory)" if editing else "nothing: this session only reads"
        if self.preset is not None and self.preset.name == "codex":
            mode = "workspace-write" if editing else "read-only"
            web = "Web search is available." if self.web_search(role, request) else "Web search is not available."
            return (
                f"You run in codex's `{mode}` sandbox: you may write {where}. The rest of the filesystem, /tmp "
                f"included, is read-only and the network is off. {web}"
            )
        if self.sandbox == "bwrap":
            return (
                f"You run in a bubblewrap sandbox: you may write {where}, plus a private /tmp that is discarded "
                "afterwards. The rest of the filesystem is read-only; writes elsewhere fail."
            )
        return (
            f"Write {where}; never edit protected paths, files outside the worktree, or git metadata. "
            "The diff of the worktree is checked after the session and a violating patch is discarded."
        )

    def claude_tools(self, role: Role, request: answers.Request) -> tuple[list[str], list[str]]:
        """Built-in tools (`--tools`) and permission rules (`--allowedTools`) for Claude-style templates."""
        writes = role == "diagnosis_patch" or self.channel == "file"
        return guard.claude_tools(writes, self.web_search(role, request), self.policy(request))

    def values(self, role: Role, request: answers.Request, prompt: str, files: dict[str, Path]) -> dict[str, str]:
        """The placeholder values of one session (`files`: prompt, result, schema, system_prompt paths)."""
        cfg = self.config.for_role(role)
        editing = isinstance(request, DiagnosisRequest)
        worktree = Path(request.worktree) if isinstance(request, DiagnosisRequest) else None
        protected = request.component_globs.get("protected", []) if isinstance(request, DiagnosisRequest) else []
        policy = self.policy(request)
        spec = {
            "worktree": str(worktree) if worktree else "",
            "protected": protected,
            **guard.policy_spec(policy),
            "writable": [str(files["result"])] if self.channel == "file" else [],
        }
        hook = {"type": "command", "command": guard.hook_command(spec)}
        settings = {"hooks": {"PreToolUse": [{"matcher": "", "hooks": [hook]}]}}
        tools, allowed = self.claude_tools(role, request)
        system = render_system(role, self.config.prompts, self.run_dir)
        fallback = cfg.fallback_model if cfg.fallback_model and cfg.fallback_model != cfg.model else ""
        inline = prompt if len(prompt.encode("utf-8")) <= ARG_LIMIT else by_reference(files["prompt"])
        values = {
            "prompt": inline,
            "prompt_file": str(files["prompt"]),
            "result_file": str(files["result"]),
            "schema": json.dumps(result_schema(role), sort_keys=True),
            "schema_file": str(files["schema"]),
            "system_prompt": system,
            "system_prompt_file": str(files["system"]),
            "system_prompt_json": toml_string(system),
            "model": cfg.model,
            "fallback_model": fallback,
            "max_turns": str(cfg.max_turns),
            "budget": f"{cfg.max_budget_usd:g}" if cfg.max_budget_usd else "",
            "effort": cfg.effort or "",
            "cwd": str(worktree or self.run_dir),
            "run_dir": str(self.run_dir),
            "sandbox_mode": "workspace-write" if editing else "read-only",
            "tools": ",".join(tools),
            "allowed_tools": ",".join(allowed),
            "pi_tools": "read,grep,find,ls,bash" + (",edit,write" if editing or self.channel == "file" else ""),
            "settings": json.dumps(settings),
            "codex_web_search": "live" if self.web_search(role, request) else "disabled",
        }
        assert set(values) == set(PLACEHOLDERS)
        return values

    def session_files(self, role: Role, request: answers.Request) -> dict[str, Path]:
        base = llm_backend.transcript_path(self.run_dir, request.iteration, role, request.attempt).with_suffix("")
        return {
            "prompt": Path(f"{base}.prompt.md"),
            "result": Path(f"{base}.result.json"),
            "schema": Path(f"{base}.schema.json"),
            "system": Path(f"{base}.system.md"),
        }

    def argv_for(self, role: Role, request: answers.Request, prompt: str) -> tuple[list[str], str | None]:
        """The agent's argv for one session (wrapped in bubblewrap when confined) and its stdin text, writing the
        prompt, schema and system prompt files it refers to."""
        files = self.session_files(role, request)
        files["prompt"].write_text(prompt, encoding="utf-8")
        files["schema"].write_text(json.dumps(strict_schema(result_schema(role)), indent=2), encoding="utf-8")
        files["system"].write_text(render_system(role, self.config.prompts, self.run_dir), encoding="utf-8")
        argv, stdin_file = command_argv(self.template, self.values(role, request, prompt, files))
        if not argv:
            raise ConfigError("sessions.command is empty after filling its placeholders")
        self.last_program = argv[0]
        stdin = Path(stdin_file).read_text(encoding="utf-8") if stdin_file else None
        if self.sandbox == "bwrap":
            worktree = Path(request.worktree) if isinstance(request, DiagnosisRequest) else None
            own = [files["result"]] if self._binds_result_file() else []
            argv = self.confined(argv, worktree, [Path(p) for p in request.readable], own)
        return argv, stdin

    def _binds_result_file(self) -> bool:
        """Whether the CLI writes its answer to `{result_file}` from inside saddler's bubblewrap."""
        return self.sandbox == "bwrap" and "{result_file}" in self.template

    def confined(
        self, argv: list[str], worktree: Path | None = None, visible: Sequence[Path] = (), own: Sequence[Path] = ()
    ) -> list[str]:
        """`argv` inside saddler's bubblewrap: writable only `worktree` (None: nothing), the files `own` the CLI
        itself writes (its answer file) and the preset's state folder (`Preset.state_home`; a CLI with its own
        sandbox keeps the agent's commands out of both); the run folder replaced by one showing only `visible`
        (what a session may read of it, read-only); read-only HOME and whatever the agent's executable and
        saddler's own entry points need (`installs`), wherever they are installed (under /tmp too, which the
        sandbox otherwise replaces with an empty one)."""
        ok, why = confine.bwrap_works()
        if not ok:
            raise BackendError(
                f"sessions.sandbox needs bubblewrap to confine {argv[0]!r}: {why}. Install bubblewrap, or set "
                'sessions.sandbox = "none" to let the agent write anywhere your user can'
            )
        readable = [Path.home(), *installs.executable_roots(argv[0]), *installs.saddler_roots()]
        readable = [p for p in dict.fromkeys(readable) if p.exists()]
        cwd = worktree or self.run_dir
        writable = [worktree] if worktree else []
        for path in own:
            path.touch()  # a file is bound where it exists
            writable.append(path)
        state = self.preset.state_folder(self.environment()) if self.preset is not None else None
        if state is not None:
            state.mkdir(parents=True, exist_ok=True)
            writable.append(state)
        return confine.bwrap_argv(
            argv, writable=writable, readable=readable, cwd=cwd, sealed=self.run_dir, visible=visible
        )

    # -- one session ---------------------------------------------------------------------------

    def _session(self, role: Role, request: answers.Request) -> answers.Result:
        cfg = self.config.for_role(role)
        transcript_file = llm_backend.transcript_path(self.run_dir, request.iteration, role, request.attempt)
        files = self.session_files(role, request)
        web = self.web_search(role, request)
        prompt = render(
            role,
            request,
            self.config.prompts,
            result_file=str(files["result"]) if self.channel == "file" else None,
            web_search=web,
            base_dir=self.run_dir,
            tool_limits=self.tool_limits(role, request),
        )
        argv, stdin = self.argv_for(role, request, prompt)
        self.last_argv, self.last_stdin = argv, stdin
        if shutil.which(self.last_program) is None:
            raise BackendError(f"agent CLI {self.last_program!r} not found on PATH; install it or fix sessions.command")
        cwd = Path(request.worktree) if isinstance(request, DiagnosisRequest) else self.run_dir
        transcript = llm_backend.Transcript(transcript_file)
        shown = ["<prompt>" if a == prompt else a for a in argv]
        transcript.write("prompt", role=role, text=prompt, argv=shown, stdin=str(files["prompt"]) if stdin else None)
        stats = SessionStats(backend=self.name, model=cfg.model, transcript_path=str(transcript_file))
        started = self.clock()

        def attempt(n: int) -> answers.Result:
            if self._binds_result_file():
                files["result"].write_bytes(b"")  # emptied, not removed: bubblewrap binds it where it exists
            else:
                files["result"].unlink(missing_ok=True)
            transcript.write("attempt", number=n)
            run = self._run(argv, cwd, stdin, files, request.db_path, cfg.timeout_s)
            for line in run.stdout.splitlines():
                transcript.write("stdout", line=line)
            transcript.write("exit", returncode=run.returncode, timed_out=run.timed_out, stderr=run.stderr[-4000:])
            return self._conclude(role, request, run, files["result"], stats)

        result = self._with_retries(role, request, stats, transcript, attempt)
        result.stats.duration_s = round(self.clock() - started, 3)
        transcript.write("outcome", outcome=result.stats.outcome, cost_usd=result.stats.cost_usd)
        return result

    def environment(self, base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
        """The agent's environment: `base` (default: this process's), saddler's own entry points (`evo-dag`) first
        on PATH, `extra`, and the preset's variables where the user sets none."""
        base = os.environ if base is None else base
        bin_dir = str(Path(sys.executable).parent)
        env = {**base, "PATH": f"{bin_dir}{os.pathsep}{base.get('PATH', '')}", **extra}
        return self.preset.environment(env) if self.preset is not None else env

    def in_sandbox(self, argv: list[str]) -> list[str]:
        """`argv` inside the sandbox a reflection session's agent runs its commands in: saddler's bubblewrap, the
        preset's own (`codex sandbox` with the sessions' settings), both nested as codex gets them, or none. For
        `saddler doctor`'s probes."""
        own = [self.preset.name, *self.preset.sandbox_command] if self.preset and self.preset.sandbox_command else []
        if self.sandbox == "bwrap":
            return self.confined([*own, *argv])
        return [*own, *argv]

    def _run(
        self, argv: list[str], cwd: Path, stdin: str | None, files: dict[str, Path], db_path: str, timeout_s: float
    ) -> ProcessRun:
        env = self.environment(
            SADDLER_PROMPT_FILE=str(files["prompt"]), SADDLER_RESULT_FILE=str(files["result"]), EVODAG_DB=db_path
        )
        return run_process_group(argv, cwd=cwd, env=env, timeout_s=timeout_s, stdin_text=stdin)

    def _conclude(
        self, role: Role, request: answers.Request, run: ProcessRun, result_file: Path, stats: SessionStats
    ) -> answers.Result:
        usage = parse_usage(run.stdout)
        stats.turns += usage["turns"]
        stats.tokens_in += usage["tokens_in"]
        stats.tokens_out += usage["tokens_out"]
        stats.cost_usd = round(stats.cost_usd + usage["cost_usd"], 6)
        final = usage["final"] or {}
        if run.timed_out:
            return answers.failed_result(role, request, stats, "timeout")
        if final.get("subtype") in _FAILED_SUBTYPES:
            stats.error = "; ".join(str(e) for e in final.get("errors") or [])[:2000]
            return answers.failed_result(role, request, stats, _FAILED_SUBTYPES[final["subtype"]])
        answered = result_file.is_file() and result_file.stat().st_size > 0
        failure = read_failure(run.stdout, run.stderr, run.returncode, self.now())
        if failure is not None:
            if failure.kind == "auth":
                raise AuthenticationError(
                    f"the agent CLI {self.last_program!r} was refused authentication ({failure.message[:200]}): "
                    f"set {self.key_variable} (or log the CLI in), then resume the run"
                )
            if failure.kind == "usage_limit":
                raise llm_backend.UsageLimitError(failure.message, failure.resets_at)
            if failure.kind == "transient":
                raise llm_backend.TransientError(failure.message)
            if failure.kind == "sandbox":
                raise BackendError(sandbox_fault(self.last_program, failure.message, self.preset))
            stats.error = failure.message
            return answers.failed_result(role, request, stats, "error")
        if run.returncode != 0 and not answered:
            stats.error = (run.stderr.strip() or run.stdout.strip())[-500:]
            return answers.failed_result(role, request, stats, f"exit_{run.returncode}")
        payload: Any = result_file.read_text(encoding="utf-8") if answered else final_message(run.stdout)
        try:
            return answers.parse_result(role, drop_nulls(answers.extract_json(payload)), stats)
        except answers.OutputError as exc:
            stats.error = str(exc)
            return answers.failed_result(role, request, stats, "unparsable_output")


def sandbox_fault(program: str, message: str, preset: Preset | None) -> str:
    """What to say when the sandbox around the agent could not start (every session would fail the same way)."""
    fix = preset.sandbox_fix if preset is not None and preset.sandbox_fix else "see what it lacks"
    return (
        f"the sandbox could not start the agent CLI {program!r} ({message[:300]}), so no session can work: "
        f"{fix}; `saddler doctor` checks it without spending, then resume the run"
    )


def by_reference(prompt_file: Path) -> str:
    """What `{prompt}` becomes when the prompt is too long for one argv element: a pointer to its file."""
    return (
        f"Your full instructions are in the file {prompt_file} (too long to pass here). Read that whole file "
        "first, then follow it exactly."
    )


def unsealed_reason(name: str, why: str) -> str:
    """What `saddler doctor` says when held-out files stay readable to `name` (bubblewrap cannot run: `why`)."""
    return (
        f"bubblewrap cannot run here ({why}): {name} runs in its own sandbox, which limits writes but lets the agent "
        "read the run's held-out files (dev and test traces, the full evodag.sqlite). Install bubblewrap, or set "
        'sessions.sandbox = "none" to accept that'
    )

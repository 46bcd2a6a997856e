"""The `claude` backend: each session is one claude-agent-sdk conversation.

Diagnosis runs with the candidate's worktree as cwd and may read, edit, grep/glob and run a few Bash
commands (`evo-dag` read-only, `git diff`, `git status`, the harness's check command verbatim); reflection and
evolution only read. `setting_sources=[]` keeps the user's own settings out; a PreToolUse hook
(`saddler.sessions.guard`, failing closed) refuses edits of protected paths or outside the worktree and any other
Bash command. The answer comes back as the SDK's structured output (`output_format` json_schema) and is validated
against the session schema. Limits (model, turns, budget, timeout, effort) are per role (`SessionConfig.for_role`).

`MIN_SDK_VERSION` is the oldest claude-agent-sdk with every option and result field used here and in the
claude_agent template (`api_error_status` arrived in 0.1.76; `setting_sources=[]` was honoured from 0.1.60,
`effort` from 0.1.36, `tools` from 0.1.12, `output_format` and `fallback_model` from 0.1.7, `max_budget_usd`
from 0.1.6); pyproject pins it and `saddler doctor` checks it.

Failed sessions (budget, max turns, bad output, timeout, transient errors after retries) become failed
results; rejected credentials raise `AuthenticationError` naming ANTHROPIC_API_KEY.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saddler.errors import AuthenticationError, BackendError
from saddler.sessions import answers, failures, guard, llm_backend
from saddler.sessions.presets import PRESETS
from saddler.sessions.prompts import render, render_system
from saddler.sessions.schema import (
    DiagnosisRequest,
    Role,
    SessionStats,
    result_schema,
)

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeAgentOptions, Transport

    from saddler.benchmark import Benchmark
    from saddler.config import SessionConfig

KEY_VARIABLE = "ANTHROPIC_API_KEY"
MIN_SDK_VERSION = "0.1.76"
EFFORTS = PRESETS["claude"].efforts
_TRANSIENT_STATUS = failures.TRANSIENT_STATUS
_AUTH_TEXT = re.compile(
    r"invalid api key|authentication[_ ]failed|not logged in|please run /login|invalid x-api-key|"
    r"oauth token (?:has )?expired|api key (?:is )?(?:missing|required)",
    re.IGNORECASE,
)
_FAILED_SUBTYPES = {
    "error_max_turns": "max_turns",
    "error_max_budget_usd": "budget",
    "error_max_structured_output_retries": "unparsable_output",
}


@dataclass
class _Attempt:
    """What one SDK conversation produced."""

    result: Any = None  # ResultMessage
    assistant_error: str | None = None
    texts: list[str] = field(default_factory=list)
    exception: BaseException | None = None
    timed_out: bool = False


class ClaudeBackend(llm_backend.LLMSessionBackend):
    """Optimizer sessions on claude-agent-sdk.

    `transport_factory` (tests, remote runners) supplies the SDK `Transport`; the default is the SDK's
    own subprocess transport running the bundled `claude` CLI. `sleep` and `clock` are injectable.
    """

    name = "claude"

    def __init__(
        self,
        config: SessionConfig,
        *,
        benchmark: Benchmark | None = None,
        run_dir: Path,
        seed: int,
        transport_factory: Callable[[], Transport] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(config, benchmark=benchmark, run_dir=run_dir, seed=seed, sleep=sleep, clock=clock)
        llm_backend.check_efforts(config, EFFORTS, "Claude")
        self.transport_factory = transport_factory
        self.last_options: ClaudeAgentOptions | None = None

    # -- options -------------------------------------------------------------------------------

    def web_search(self, role: Role, request: answers.Request) -> bool:
        """Whether this session gets WebSearch/WebFetch: exploration diagnosis, when the config allows."""
        return (
            role == "diagnosis_patch"
            and getattr(request, "exploration", False)
            and self.config.allow_web_search_on_plateau
        )

    def build_options(self, role: Role, request: answers.Request) -> ClaudeAgentOptions:
        """The SDK options of one session (cwd, tools, hook, model, limits, structured output)."""
        from claude_agent_sdk import ClaudeAgentOptions, HookMatcher

        cfg = self.config.for_role(role)
        editing = isinstance(request, DiagnosisRequest)
        worktree: Path | None = None
        protected: list[str] = []
        if isinstance(request, DiagnosisRequest):
            worktree = Path(request.worktree)
            protected = request.component_globs.get("protected", ["saddler.toml"])
        policy = self.policy(request)
        tools, allowed = guard.claude_tools(editing, self.web_search(role, request), policy)
        bin_dir = str(Path(sys.executable).parent)
        return ClaudeAgentOptions(
            system_prompt=render_system(role, self.config.prompts, self.run_dir),
            cwd=str(worktree or self.run_dir),
            add_dirs=[str(self.run_dir)] if editing else [],
            setting_sources=[],
            tools=tools,
            allowed_tools=allowed,
            disallowed_tools=[] if editing else ["Edit", "Write", "MultiEdit", "NotebookEdit"],
            permission_mode="dontAsk",
            hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[make_guard(worktree, protected, policy)])]},
            model=cfg.model,
            fallback_model=cfg.fallback_model if cfg.fallback_model != cfg.model else None,
            max_turns=cfg.max_turns,
            max_budget_usd=cfg.max_budget_usd or None,
            effort=cfg.effort,  # type: ignore[arg-type]
            output_format={"type": "json_schema", "schema": result_schema(role)},
            env=PRESETS["claude"].environment(
                {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "EVODAG_DB": request.db_path}
                | {k: v for k, v in os.environ.items() if k == "CLAUDE_CODE_MAX_RETRIES"}
            ),
        )

    # -- one session ---------------------------------------------------------------------------

    def _session(self, role: Role, request: answers.Request) -> answers.Result:
        web = self.web_search(role, request)
        limits = guard.describe_limits(role == "diagnosis_patch", self.policy(request), web=web)
        prompt = render(role, request, self.config.prompts, web_search=web, base_dir=self.run_dir, tool_limits=limits)
        options = self.build_options(role, request)
        self.last_options = options
        path = llm_backend.transcript_path(self.run_dir, request.iteration, role, request.attempt)
        transcript = llm_backend.Transcript(path)
        transcript.write("prompt", role=role, text=prompt, system=options.system_prompt)
        stats = SessionStats(backend=self.name, model=options.model or "", transcript_path=str(path))
        started = self.clock()
        timeout_s = self.config.for_role(role).timeout_s

        def attempt(n: int) -> answers.Result:
            transcript.write("attempt", number=n)
            outcome = asyncio.run(self._converse(prompt, options, transcript, timeout_s))
            self._add_usage(stats, outcome)
            return self._conclude(role, request, outcome, stats)

        result = self._with_retries(role, request, stats, transcript, attempt)
        duration = round(self.clock() - started, 3)
        result.stats.duration_s = duration
        transcript.write("outcome", outcome=result.stats.outcome, cost_usd=result.stats.cost_usd, duration_s=duration)
        return result

    async def _converse(
        self, prompt: str, options: ClaudeAgentOptions, transcript: llm_backend.Transcript, timeout_s: float
    ) -> _Attempt:
        from claude_agent_sdk import AssistantMessage, ResultMessage, TextBlock, query

        out = _Attempt()

        async def consume() -> None:
            transport = self.transport_factory() if self.transport_factory is not None else None
            async for message in query(prompt=prompt, options=options, transport=transport):
                transcript.write("message", type=type(message).__name__, data=_plain(message))
                if isinstance(message, AssistantMessage):
                    out.assistant_error = message.error or out.assistant_error
                    out.texts += [b.text for b in message.content if isinstance(b, TextBlock)]
                elif isinstance(message, ResultMessage):
                    out.result = message

        try:
            await asyncio.wait_for(consume(), timeout=timeout_s)
        except TimeoutError:
            out.timed_out = True
        except Exception as exc:  # the SDK's process/connection errors are classified by _conclude
            out.exception = exc
            transcript.write("error", type=type(exc).__name__, error=str(exc))
        return out

    def _add_usage(self, stats: SessionStats, out: _Attempt) -> None:
        res = out.result
        if res is None:
            return
        usage = res.usage or {}
        stats.turns += int(res.num_turns or 0)
        stats.cost_usd = round(stats.cost_usd + float(res.total_cost_usd or 0.0), 6)
        stats.tokens_in += sum(
            int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        stats.tokens_out += int(usage.get("output_tokens") or 0)
        if res.model_usage:  # the models that actually answered (the fallback model shows up here)
            stats.model = ",".join(sorted(res.model_usage))

    def _conclude(self, role: Role, request: answers.Request, out: _Attempt, stats: SessionStats) -> answers.Result:
        res = out.result
        texts = [str(out.exception or "")]
        if res is not None:
            texts += [res.result or "", *(res.errors or [])]
        if out.assistant_error == "authentication_failed" or (res is not None and res.api_error_status in (401, 403)):
            raise AuthenticationError(_auth_message())
        ended_in_error = res is None or (res.is_error and res.subtype not in _FAILED_SUBTYPES)
        if ended_in_error and any(_AUTH_TEXT.search(t) for t in texts if t):
            raise AuthenticationError(_auth_message())
        if out.assistant_error == "billing_error":
            raise BackendError("the Anthropic account cannot be billed (billing_error); check the account's credits")
        if out.timed_out:
            return answers.failed_result(role, request, stats, "timeout")
        if res is None:
            if _is_cli_missing(out.exception):
                raise BackendError(f"claude CLI not found ({out.exception}); reinstall claude-agent-sdk")
            raise llm_backend.TransientError(f"session ended without a result: {out.exception}")
        if res.subtype in _FAILED_SUBTYPES:
            stats.error = "; ".join(res.errors or []) or res.subtype
            return answers.failed_result(role, request, stats, _FAILED_SUBTYPES[res.subtype])
        if res.is_error:
            said = failures.classify(str(res.result or ""), res.api_error_status, self.now())
            if said.kind == "usage_limit":
                raise llm_backend.UsageLimitError(said.message, said.resets_at)
            if res.api_error_status in _TRANSIENT_STATUS or out.assistant_error in ("rate_limit", "server_error"):
                raise llm_backend.TransientError(
                    f"API error {res.api_error_status or out.assistant_error}: {res.result}"
                )
            stats.error = (res.result or "; ".join(res.errors or []) or res.subtype).strip()
            return answers.failed_result(role, request, stats, "error")
        payload = res.structured_output if res.structured_output is not None else res.result
        try:
            return answers.parse_result(role, payload, stats)
        except answers.OutputError as exc:
            stats.error = str(exc)
            return answers.failed_result(role, request, stats, "unparsable_output")


def make_guard(worktree: Path | None, protected: list[str], policy: guard.BashPolicy) -> Any:
    """The PreToolUse hook callback: `guard.guard_decision` (edits inside `worktree` only, never of a
    protected path, no edits at all when `worktree` is None; Bash under `policy`), failing closed: a guard
    that raises denies the call instead of letting the SDK report a hook error (which lets it through)."""

    async def pre_tool_use(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        return guard.safe_decision(hook_input, lambda i: guard.guard_decision(i, worktree, protected, policy))

    return pre_tool_use


def _auth_message() -> str:
    return (
        f"Anthropic authentication failed: set {KEY_VARIABLE} to a valid API key "
        "(or log the bundled claude CLI in), then resume the run"
    )


def _is_cli_missing(exc: BaseException | None) -> bool:
    try:
        from claude_agent_sdk import CLINotFoundError
    except ImportError:  # pragma: no cover - the SDK is a dependency
        return False
    return isinstance(exc, CLINotFoundError)


def _plain(message: Any) -> Any:
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        return dataclasses.asdict(message)
    return message

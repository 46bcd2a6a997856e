"""The command backend's presets (`claude -p`, `codex exec`, `pi`) and its template language.

A template is split like a shell command; `{placeholder}`s are filled inside each word (a filled word stays one
argv element). Two additions: a bracketed group `[--effort {effort}]` is dropped when one of its placeholders is
empty, and a trailing `< {prompt_file}` feeds that file on the agent's stdin. Prompts never travel as one argv
element in the presets: Linux refuses an argument over 128 KiB (MAX_ARG_STRLEN), and an evolution prompt of a
long run comes close to that.

Flags were checked against each CLI's documentation and, for `claude`, against the CLI bundled with
claude-agent-sdk (`--max-turns` and `--system-prompt-file` are accepted but not listed in its `--help`).
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from saddler.agentcli import build_argv
from saddler.errors import ConfigError

if TYPE_CHECKING:
    from saddler.config import SessionConfig

Channel = Literal["structured", "message", "file"]

_GROUP = re.compile(r"\[([^\[\]]*\{[a-z_]+\}[^\[\]]*)\]")
_NAME = re.compile(r"\{([a-z_]+)\}")
_FLAG = re.compile(r"^(--?[A-Za-z][\w-]*)")


@dataclass(frozen=True)
class Preset:
    """A known CLI agent.

    `template`: how an optimizer session runs it (`PLACEHOLDERS`); `fleet`: how a fleet mode experiment runs it
    (`FLEET_PLACEHOLDERS`: free-form answer, the workdir writable, streamed JSON, the prompt by file), with
    `fleet_note` saying how `budget_per_iter`, `max_turns` and `fallback_model` reach it. `answer`: how its JSON
    answer comes back (`structured`: the CLI enforces the schema and returns it; `message`: the agent's final
    message). `own_sandbox`: whether the CLI confines the agent itself. `hides_held_out`: whether the agent is kept
    from reading what a session may not see of the run folder (the guard's read policy; issue 20); a preset without
    either is wrapped in saddler's bubblewrap by the `auto` sandbox, which shows only the readable part of the run
    folder. `state_home`: (variable, default) of the folder the CLI itself writes its state to (writable inside
    saddler's bubblewrap; the agent's own commands stay in the CLI's sandbox). `efforts`: the values its effort
    setting takes. `touches`: what the agent may write, per role, for the README and `saddler doctor`.
    """

    name: str
    template: str
    fleet: str
    fleet_note: str
    key_variables: tuple[str, ...]
    answer: Literal["structured", "message"]
    own_sandbox: bool
    efforts: tuple[str, ...]
    help_argv: tuple[str, ...]
    hidden_flags: tuple[str, ...]
    touches: str
    env: tuple[tuple[str, str], ...] = ()  # set for the CLI unless the user's environment sets it
    sandbox_fix: str = ""  # what to do when its sandbox cannot start (`failures.sandbox_failure`)
    sandbox_command: tuple[str, ...] = ()  # runs a command in its own sandbox, as its sessions get it (doctor)
    hides_held_out: bool = False
    state_home: tuple[str, str] | None = None

    def state_folder(self, env: Mapping[str, str]) -> Path | None:
        """The folder the CLI writes its own state to under `env` (None: it writes none that matters)."""
        if self.state_home is None:
            return None
        variable, default = self.state_home
        return Path(env.get(variable) or default).expanduser()

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """`base` with this preset's variables added where `base` does not set them."""
        return {**dict(self.env), **base}

    @property
    def key_variable(self) -> str:
        return self.key_variables[0]


CODEX_SANDBOX = (
    "sandbox_workspace_write.exclude_slash_tmp=true",
    "sandbox_workspace_write.exclude_tmpdir_env_var=true",
)
"""codex's workspace-write sandbox without /tmp and $TMPDIR: only the worktree is writable (issue 21.1)."""


def _configs(settings: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(word for setting in settings for word in ("--config", setting))


PRESETS: dict[str, Preset] = {
    "claude": Preset(
        name="claude",
        template=(
            "claude -p --output-format json --model {model} [--fallback-model {fallback_model}] "
            "--max-turns {max_turns} [--max-budget-usd {budget}] [--effort {effort}] "
            "--setting-sources '' --settings {settings} --permission-mode dontAsk --add-dir {run_dir} "
            "--tools {tools} --allowedTools {allowed_tools} --system-prompt-file {system_prompt_file} "
            "--json-schema {schema} --no-session-persistence < {prompt_file}"
        ),
        fleet=(
            "claude -p --output-format stream-json --verbose --model {model} [--fallback-model {fallback_model}] "
            "[--max-budget-usd {budget}] [--max-turns {max_turns}] --permission-mode acceptEdits "
            "--allowedTools Bash,Read,Edit,Write,Glob,Grep,WebSearch,WebFetch < {prompt_file}"
        ),
        fleet_note="",  # all three are claude flags
        key_variables=("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"),
        answer="structured",
        own_sandbox=True,
        efforts=("low", "medium", "high", "xhigh", "max"),
        help_argv=("--help",),
        hidden_flags=("--max-turns", "--system-prompt-file"),
        touches=(
            "tools limited to Read, Glob, Grep, Bash (+ Edit, Write in diagnosis); the saddler guard hook refuses "
            "edits outside the worktree or of protected paths and any Bash beyond the read-only allowlist; "
            "reflection and evolution edit nothing"
        ),
        env=(("CLAUDE_CODE_MAX_RETRIES", "2"),),  # its own retries, under saddler's (sessions.retries)
        hides_held_out=True,  # --settings carries the guard hook, whose read policy refuses held-out paths
    ),
    "codex": Preset(
        name="codex",
        template=(
            "codex exec --json --skip-git-repo-check --sandbox {sandbox_mode} --model {model} "
            + "".join(f"--config {setting} " for setting in CODEX_SANDBOX)
            + "'--config=web_search=\"{codex_web_search}\"' --config features.multi_agent=false "
            "--config features.goals=false "
            "--config developer_instructions={system_prompt_json} ['--config=model_reasoning_effort=\"{effort}\"'] "
            "--output-schema {schema_file} --output-last-message {result_file} - < {prompt_file}"
        ),
        fleet="codex exec --json --sandbox workspace-write --skip-git-repo-check --model {model} - < {prompt_file}",
        fleet_note=(
            "codex exec has no budget, turn-limit or fallback-model option: saddler stops a session at "
            "config.max_turns turns (each command, patch and message of an exec is one), config.budget_per_iter is "
            "ignored (codex reports tokens, not dollars), and a failed session is retried once with "
            "config.fallback_model"
        ),
        key_variables=("OPENAI_API_KEY", "CODEX_API_KEY"),
        answer="structured",
        own_sandbox=True,
        efforts=("minimal", "low", "medium", "high", "xhigh"),
        help_argv=("exec", "--help"),
        hidden_flags=(),
        touches=(
            "codex's own sandbox: diagnosis `workspace-write` (the worktree only: /tmp and $TMPDIR excluded, no "
            "network), reflection and evolution `read-only`; web search only in the exploration diagnosis; protected "
            "paths are enforced on the diff afterwards"
        ),
        sandbox_command=("sandbox", "--config", 'sandbox_mode="read-only"', *_configs(CODEX_SANDBOX), "--"),
        sandbox_fix=(
            "codex keeps its sandbox helper under CODEX_HOME and refuses to put it under /tmp: set CODEX_HOME to a "
            "folder outside /tmp (e.g. export CODEX_HOME=~/.codex)"
        ),
        state_home=("CODEX_HOME", "~/.codex"),
    ),
    "pi": Preset(
        name="pi",
        template=(
            "pi --mode json --no-session --no-extensions --no-skills --no-prompt-templates --no-context-files "
            "--model {model} [--thinking {effort}] --tools {pi_tools} --system-prompt {system_prompt} "
            "@{prompt_file} 'Follow the instructions in the attached file.'"
        ),
        fleet=(
            "pi --mode json --no-session --model {model} @{prompt_file} 'Follow the instructions in the attached file.'"
        ),
        fleet_note=(
            "pi has no budget, turn-limit or fallback-model option: saddler stops a session when its streamed "
            "cost passes config.budget_per_iter or its turns pass config.max_turns, and retries a failed session "
            "once with config.fallback_model"
        ),
        key_variables=("ANTHROPIC_API_KEY",),
        answer="message",
        own_sandbox=False,
        efforts=("minimal", "low", "medium", "high", "xhigh", "max"),
        help_argv=("--help",),
        hidden_flags=(),
        touches=(
            "pi has no sandbox: saddler runs it in bubblewrap with the whole filesystem read-only except the "
            "worktree (diagnosis) and a private /tmp; reflection and evolution get read-only tools"
        ),
        sandbox_fix=(
            "bubblewrap shows pi read-only whatever its executable, its interpreter and saddler need; install pi "
            'and node where the sandbox finds them, or set sessions.sandbox = "none"'
        ),
    ),
}
PLACEHOLDERS = (
    "prompt", "prompt_file", "result_file", "schema", "schema_file", "system_prompt", "system_prompt_file",
    "system_prompt_json", "model", "fallback_model", "max_turns", "budget", "effort", "cwd", "run_dir",
    "sandbox_mode", "tools", "allowed_tools", "pi_tools", "settings", "codex_web_search",
)  # fmt: skip


FLEET_PLACEHOLDERS = ("prompt", "prompt_file", "model", "fallback_model", "budget", "max_turns")
"""What a fleet agent command (`Preset.fleet`, fleet.json `config.command`) may use; empty `budget` / `max_turns`
mean no limit."""


def placeholders_in(template: str) -> set[str]:
    """The placeholder names a template uses."""
    return set(_NAME.findall(template))


def expand_groups(template: str, values: dict[str, str]) -> str:
    """Keep each `[...]` group that holds a placeholder when all its placeholders are non-empty, else drop it."""

    def keep(match: re.Match[str]) -> str:
        names = _NAME.findall(match.group(1))
        return match.group(1) if all(values.get(n, "") for n in names) else ""

    return _GROUP.sub(keep, template)


def command_argv(template: str, values: dict[str, str]) -> tuple[list[str], str | None]:
    """The argv of `template` filled with `values`, and the file to feed on stdin (`< FILE` at the end) or None."""
    argv = build_argv(expand_groups(template, values), values)
    if "<" not in argv:
        return argv, None
    at = argv.index("<")
    if at != len(argv) - 2 or at == 0:
        raise ConfigError("sessions.command: `<` must come last, followed by one file (e.g. `< {prompt_file}`)")
    return argv[:at], argv[at + 1]


def flags_of(template: str) -> list[str]:
    """The option names a template passes (`--model`, `-p`, ...), in order, without duplicates."""
    flags: list[str] = []
    for word in template.split():
        match = _FLAG.match(word.strip("'\"[]"))
        if match and match.group(1) not in flags:
            flags.append(match.group(1))
    return flags


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` in the strict form OpenAI structured outputs require (`codex exec --output-schema`): every object
    closed (`additionalProperties: false`) with all its properties required, optional ones made nullable, no
    defaults. Answers then carry `null` for what they leave out; `drop_nulls` removes those before validation."""
    out = copy.deepcopy(schema)

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
            return
        if not isinstance(node, dict):
            return
        node.pop("default", None)
        if node.get("type") == "object" and isinstance(node.get("properties"), dict):
            required = set(node.get("required", []))
            for name, prop in node["properties"].items():
                if name not in required and isinstance(prop, dict) and not _nullable(prop):
                    node["properties"][name] = {"anyOf": [prop, {"type": "null"}]}
            node["required"] = list(node["properties"])
            node["additionalProperties"] = False
        for value in node.values():
            visit(value)

    visit(out)
    return out


def _nullable(prop: dict[str, Any]) -> bool:
    return prop.get("type") == "null" or any(
        isinstance(o, dict) and o.get("type") == "null" for o in prop.get("anyOf", [])
    )


def drop_nulls(value: Any) -> Any:
    """`value` without the `null` members of its objects (a strict schema makes absent fields explicit nulls)."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def resolve_command(config: SessionConfig) -> tuple[str, str]:
    """`(template, key_variable)` for `sessions.command`: a preset or a custom template."""
    spec = config.command.strip()
    if not spec:
        raise ConfigError("sessions.command is empty: set a preset (claude, codex, pi) or a command template")
    if spec in PRESETS:
        return PRESETS[spec].template, PRESETS[spec].key_variable
    try:
        executable = Path(shlex.split(spec)[0]).name
    except (ValueError, IndexError) as exc:
        raise ConfigError(f"sessions.command: cannot parse {spec!r}: {exc}") from exc
    key = next((p.key_variable for name, p in PRESETS.items() if executable == name), "the agent's API key variable")
    return spec, key


def preset_of(config: SessionConfig) -> Preset | None:
    """The preset `sessions.command` names, or None for a custom template."""
    return PRESETS.get(config.command.strip())


def sandbox_of(config: SessionConfig) -> Literal["bwrap", "none"]:
    """The sandbox saddler adds around the agent: `bwrap` when asked for, or `auto` and the preset either has no
    sandbox of its own (pi) or cannot keep the agent from reading held-out files (codex: its sandbox limits writes
    only). A custom template gets none under `auto`."""
    if config.sandbox == "bwrap":
        return "bwrap"
    preset = preset_of(config)
    if config.sandbox == "auto" and preset is not None and not (preset.own_sandbox and preset.hides_held_out):
        return "bwrap"
    return "none"


def falls_back_to_own_sandbox(config: SessionConfig) -> bool:
    """Whether the `auto` sandbox may fall back to the preset's own sandbox when bubblewrap cannot run (codex:
    then it still confines writes, but held-out files are readable to the agent; `saddler doctor` says so)."""
    preset = preset_of(config)
    return config.sandbox == "auto" and preset is not None and preset.own_sandbox


def answer_channel(template: str, preset: Preset | None) -> Channel:
    """How the answer comes back: the preset's way; for a custom template, `structured` when it passes the schema,
    `message` when the CLI itself writes `{result_file}`, else `file` (the agent writes `{result_file}`)."""
    if preset is not None:
        return preset.answer
    names = placeholders_in(template)
    if names & {"schema", "schema_file"}:
        return "structured"
    return "message" if "result_file" in names else "file"


def toml_string(text: str) -> str:
    """`text` as a TOML basic string literal (JSON escapes are TOML escapes; DEL must be escaped too)."""
    return json.dumps(text, ensure_ascii=True).replace("\x7f", "\\u007f")

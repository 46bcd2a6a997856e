"""`saddler doctor`'s checks of the session backends: the claude-agent-sdk backend and each command preset.

Per backend: the CLI found and its version, the flags saddler passes listed by its `--help` (flags a CLI accepts
without listing them are named in the preset), the API key present, and the sandbox the preset relies on
(saddler's guard hook for claude, bubblewrap for pi). Only local facts; nothing is spent.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

Runner = Callable[[list[str]], str | None]
Which = Callable[[str], str | None]
Probe = Callable[[], tuple[bool, str]]
OAUTH_VARIABLE = "CLAUDE_CODE_OAUTH_TOKEN"


@dataclass(frozen=True)
class Check:
    """One prerequisite: whether it holds, whether the configuration needs it, and what was found."""

    name: str
    ok: bool
    required: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_ok(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str] | None:
    """`argv` run with stdin closed and its output captured, or None when it cannot run, times out or fails."""
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc if proc.returncode == 0 else None


def help_text(argv: list[str], timeout_s: float = 20.0) -> str | None:
    """The whole output of `argv` (a `--help`), or None when it cannot run or fails."""
    proc = run_ok(argv, timeout_s)
    return None if proc is None else f"{proc.stdout}\n{proc.stderr}"


def version_tuple(version: str) -> tuple[int, ...]:
    """`"0.1.76"` -> `(0, 1, 76)`; pre-release or local suffixes are ignored."""
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])


def key_check(variables: tuple[str, ...], env: Mapping[str, str], *, required: bool) -> Check:
    present = [v for v in variables if env.get(v, "").strip()]
    if present:
        return Check(f"env:{variables[0]}", True, required, f"{present[0]} is set")
    either = " or ".join(variables)
    return Check(f"env:{variables[0]}", False, required, f"{either} is not set; export {variables[0]}=... first")


MIN_GIT_VERSION = (2, 27)  # `update-ref --stdin` with start / commit transactions (saddler.harness.gitbatch)


def git_check(which: Which, version: Runner) -> Check:
    """git on PATH, and not older than `MIN_GIT_VERSION` when its version can be read."""
    check = tool_check("git", which, version, required=True)
    found = re.search(r"git version (\d+)\.(\d+)", check.detail)
    if check.ok and found and (int(found[1]), int(found[2])) < MIN_GIT_VERSION:
        need = ".".join(map(str, MIN_GIT_VERSION))
        detail = f"{check.detail} is older than {need}, which saddler needs (ref transactions); upgrade git"
        return Check("git", False, True, detail)
    return check


def tool_check(name: str, which: Which, version: Runner, *, required: bool) -> Check:
    path = which(name)
    if path is None:
        return Check(name, False, required, f"{name} not found on PATH; install it")
    found = version([path, "--version"])
    return Check(name, found is not None, required, found or f"{path} --version failed")


def sdk_checks(env: Mapping[str, str], version: Runner, *, required: bool) -> list[Check]:
    """The `claude` backend: claude-agent-sdk importable and at least `MIN_SDK_VERSION`, its bundled CLI, the key."""
    from pathlib import Path

    from saddler.sessions.claude import KEY_VARIABLE

    try:
        import claude_agent_sdk
    except ImportError:
        missing = Check("claude-agent-sdk", False, required, "claude_agent_sdk cannot be imported; pip install saddler")
        return [missing, key_check((KEY_VARIABLE, OAUTH_VARIABLE), env, required=required)]
    checks = [sdk_version_check(getattr(claude_agent_sdk, "__version__", "0"), required=required)]
    cli = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    found = version([str(cli), "--version"]) if cli.is_file() else None
    detail = found or (f"{cli} --version failed" if cli.is_file() else f"bundled CLI missing at {cli}")
    checks.append(Check("claude-cli (bundled)", found is not None, required, detail))
    checks.append(key_check((KEY_VARIABLE, OAUTH_VARIABLE), env, required=required))
    return checks


def sdk_version_check(installed: str, *, required: bool) -> Check:
    """The installed claude-agent-sdk against the oldest version with every option saddler uses."""
    from saddler.sessions.claude import MIN_SDK_VERSION

    if version_tuple(installed) >= version_tuple(MIN_SDK_VERSION):
        return Check("claude-agent-sdk", True, required, f"claude-agent-sdk {installed} (>= {MIN_SDK_VERSION})")
    return Check(
        "claude-agent-sdk",
        False,
        required,
        f"claude-agent-sdk {installed} is older than {MIN_SDK_VERSION}, the oldest with every option saddler uses; "
        f"pip install 'claude-agent-sdk>={MIN_SDK_VERSION}'",
    )


def flags_check(executable: str, help_argv: tuple[str, ...], flags: list[str], hidden: tuple[str, ...]) -> Check:
    """Every flag saddler passes is listed by the CLI's help (or known to be accepted unlisted)."""
    text = help_text([executable, *help_argv])
    shown = " ".join([executable, *help_argv])
    if text is None:
        return Check("flags", False, True, f"`{shown}` failed; cannot check the flags saddler passes")
    missing = [f for f in flags if f not in hidden and not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text)]
    if missing:
        return Check(
            "flags", False, True, f"{executable} does not know {', '.join(missing)} (per `{shown}`); upgrade it"
        )
    unlisted = [f for f in flags if f in hidden]
    extra = f" ({', '.join(unlisted)} accepted though unlisted)" if unlisted else ""
    return Check("flags", True, True, f"all {len(flags)} flags saddler passes are supported{extra}")


def guard_check() -> Check:
    """The PreToolUse command hook runs and refuses a write through an allowed prefix (it fails closed)."""
    from saddler.sessions.guard import hook_command

    command = hook_command({"worktree": "", "protected": [], "check": ""})
    hook_input = {"tool_name": "Bash", "tool_input": {"command": "git diff --output=/tmp/x"}}
    try:
        proc = subprocess.run(
            ["/bin/sh", "-c", command], input=json.dumps(hook_input), capture_output=True, text=True, timeout=30
        )
        decision = json.loads(proc.stdout or "{}").get("hookSpecificOutput", {}).get("permissionDecision")
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return Check("sandbox", False, True, f"the saddler guard hook cannot run: {exc}")
    if decision != "deny":
        return Check("sandbox", False, True, f"the saddler guard hook did not refuse a test call: {proc.stderr[-200:]}")
    return Check("sandbox", True, True, "saddler's guard hook refuses edits outside the worktree and unlisted Bash")


def command_checks(sessions: Any, env: Mapping[str, str], which: Which, version: Runner, bwrap: Probe) -> list[Check]:
    """The `command` backend as configured: its CLI, flags, key and sandbox."""
    from saddler.errors import ConfigError
    from saddler.sessions.command import unsealed_reason
    from saddler.sessions.presets import falls_back_to_own_sandbox, flags_of, preset_of, resolve_command, sandbox_of

    try:
        template, _ = resolve_command(sessions)
    except ConfigError as exc:
        return [Check("command", False, True, str(exc))]
    preset = preset_of(sessions)
    executable = shlex.split(template)[0]
    checks = [tool_check(executable, which, version, required=True)]
    if preset is not None and checks[0].ok:
        checks.append(flags_check(executable, preset.help_argv, flags_of(template), preset.hidden_flags))
    if preset is not None:
        checks.append(key_check(preset.key_variables, env, required=True))
    if sandbox_of(sessions) == "bwrap":
        ok, why = bwrap()
        who = preset.name if preset else executable
        if not ok and falls_back_to_own_sandbox(sessions):
            checks.append(Check("sandbox", False, False, unsealed_reason(who, why)))
            return checks
        detail = f"{why}: {who} runs confined to the worktree" if ok else f"{why}; {who} would not start"
        if ok and preset is not None and preset.own_sandbox:
            detail = f"{why}: saddler's bubblewrap hides the run's held-out files; inside it, {preset.touches}"
        checks.append(Check("sandbox", ok, True, detail))
    elif preset is not None and "{settings}" in template:
        checks.append(guard_check())
    elif preset is not None and preset.own_sandbox:
        checks.append(Check("sandbox", True, True, preset.touches))
    elif preset is not None:
        unconfined = f'none: {preset.name} may write anywhere your user can (sessions.sandbox = "none")'
        checks.append(Check("sandbox", True, False, unconfined))
    else:
        checks.append(
            Check(
                "sandbox", True, False, 'none: a custom template runs unconfined (sessions.sandbox = "bwrap" adds one)'
            )
        )
    return checks


def preset_overview(env: Mapping[str, str], which: Which, version: Runner, bwrap: Probe) -> list[Check]:
    """Without a run configuration: each preset's CLI, key and sandbox, for information."""
    from saddler.sessions.presets import PRESETS

    checks: list[Check] = []
    for preset in PRESETS.values():
        found = tool_check(preset.name, which, version, required=False)
        key = key_check(preset.key_variables, env, required=False)
        checks += [found, Check(f"{preset.name}:{key.name}", key.ok, False, key.detail)]
        if not preset.own_sandbox:
            ok, why = bwrap()
            checks.append(Check(f"{preset.name}:sandbox", ok, False, why))
    return checks

"""`saddler doctor`'s live probes of the command backend: what the sessions will start, started the way they start
it, with the same environment (CODEX_HOME, PATH with saddler's `evo-dag` first, the preset's variables) and in the
same sandbox, without calling any model (nothing is spent).

- the agent in its sandbox: `bwrap … -- pi --version` (saddler's bubblewrap, the binds of a session), or
  `codex sandbox --config … -- true` (codex's own sandbox with the sessions' settings, inside saddler's bubblewrap
  when codex's sessions run there: with CODEX_HOME under /tmp
  its helper cannot start and every command of a session would fail while codex exits 0);
- `evo-dag --help` in the sandbox the sessions' commands get (none for claude: its guard hook allows it).

A failed probe says what to do (`Preset.sandbox_fix`).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from saddler.doctor_backends import Check

ProbeRunner = Callable[[list[str], Mapping[str, str], Path], tuple[bool, str]]


def run_probe(argv: list[str], env: Mapping[str, str], cwd: Path, timeout_s: float = 60.0) -> tuple[bool, str]:
    """Run `argv` (stdin closed); `(exited 0, its stderr or stdout)`."""
    try:
        proc = subprocess.run(
            argv, env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, (proc.stderr.strip() or proc.stdout.strip())


def command_probes(sessions: Any, run_dir: Path, env: Mapping[str, str], probe: ProbeRunner = run_probe) -> list[Check]:
    """The probes of the `command` backend configured by `sessions` for the run folder `run_dir` (see module
    docstring); [] when the template cannot be built (the doctor reports that already)."""
    from saddler.errors import SaddlerError
    from saddler.sessions.command import CommandBackend

    try:
        backend = CommandBackend(sessions, run_dir=run_dir, seed=0)
        session_env = backend.environment(env)
        where = _where(backend)
        preset = backend.preset
        bare = backend.sandbox == "bwrap" and preset is not None and not preset.sandbox_command
        start = backend.in_sandbox([preset.name, "--version"] if bare and preset is not None else ["true"])
        evo_dag = backend.in_sandbox(["evo-dag", "--help"])
    except SaddlerError as exc:
        return [Check("sandbox:start", False, True, str(exc))]
    cwd = run_dir if run_dir.is_dir() else Path.cwd()
    fix = preset.sandbox_fix if preset is not None and preset.sandbox_fix else "see the error above"
    checks: list[Check] = []
    if where:
        shown = shlex.join(start if backend.sandbox != "bwrap" else start[start.index("--") + 1 :])
        ok, said = probe(start, session_env, cwd)
        detail = f"`{shown}` runs {where}" if ok else f"`{shown}` fails {where}: {_tail(said)}; {fix}"
        checks.append(Check("sandbox:start", ok, True, detail))
    ok, said = probe(evo_dag, session_env, cwd)
    place = where or "as the sessions run it"
    detail = (
        f"`evo-dag --help` runs {place}"
        if ok
        else f"`evo-dag --help` fails {place}: {_tail(said)}; sessions cannot query the run's history: "
        + (fix if where else "reinstall saddler (pip install saddler) in the environment saddler runs from")
    )
    checks.append(Check("evo-dag", ok, True, detail))
    return checks


def _where(backend: Any) -> str:
    preset = backend.preset
    own = f"{preset.name}'s own sandbox" if preset is not None and preset.sandbox_command else ""
    if backend.sandbox == "bwrap":
        return f"inside saddler's bubblewrap and {own}" if own else "inside saddler's bubblewrap"
    return f"inside {own}" if own else ""


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-3:])[-300:] or "no output"

"""`saddler doctor`: check the prerequisites of the configured backends without spending anything.

Only local facts are checked (versions, executables on PATH, the flags a CLI lists in its help, variables set,
imports, whether bubblewrap can create a sandbox here, and whether the agent and `evo-dag` start in the sandbox
the sessions get: `saddler.doctor_probes`); no API is called. A check is `required` when the
configuration needs it; a failed required check makes the doctor fail. Without a run configuration every
backend is checked for information only. The per-backend checks live in `saddler.doctor_backends`.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from saddler.config import ExecutorConfig, RunConfig
from saddler.doctor_backends import (
    OAUTH_VARIABLE,
    Check,
    Probe,
    Runner,
    command_checks,
    git_check,
    preset_overview,
    run_ok,
    sdk_checks,
)
from saddler.doctor_probes import ProbeRunner, command_probes, run_probe
from saddler.errors import ExecutorError
from saddler.executor.environment import rollout_gaps
from saddler.executor.sandbox import BWRAP_HINT, Sandbox, resolve_sandbox
from saddler.sessions.confine import bwrap_works

__all__ = ["Check", "healthy", "run_checks", "version_of"]


def version_of(argv: list[str]) -> str | None:
    """First output line of `argv` (e.g. `tool --version`), or None when it cannot run (10 s limit)."""
    proc = run_ok(argv, 10)
    text = (proc.stdout.strip() or proc.stderr.strip()).splitlines() if proc is not None else []
    return text[0].strip() if text else None


def run_checks(
    config: RunConfig | None,
    *,
    env: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
    version: Runner = version_of,
    sandbox: Callable[[ExecutorConfig], Sandbox] = resolve_sandbox,
    bwrap: Probe = bwrap_works,
    run_dir: Path | None = None,
    probe: ProbeRunner = run_probe,
) -> list[Check]:
    """All checks for `config` (None: informational checks of every backend, and the default sandbox). With the
    command backend, once its CLI, flags and key are found, `probe` starts the agent and `evo-dag` in the sessions'
    sandbox for the run folder `run_dir` (default: the current folder; `saddler.doctor_probes`)."""
    env = os.environ if env is None else env
    backend = config.sessions.backend if config else None
    checks = [_python(), git_check(which, version)]
    if backend in (None, "claude"):
        checks += sdk_checks(env, version, required=backend == "claude")
    if backend == "command" and config is not None:
        if config.sessions.command.strip():
            found = command_checks(config.sessions, env, which, version, bwrap)
            checks += found
            if healthy(found):
                checks += command_probes(config.sessions, run_dir or Path.cwd(), env, probe)
            else:
                checks.append(_evo_dag(which))
        else:
            checks.append(Check("command", False, True, "sessions.command is empty: set a preset (claude, codex, pi)"))
    if backend is None:
        checks += preset_overview(env, which, version, bwrap)
    if backend == "claude":
        checks.append(_evo_dag(which))
    checks.append(_sandbox(config.executor if config is not None else ExecutorConfig(), sandbox))
    if config is not None and config.benchmark == "claude-tasks":
        checks.append(_task_key(config, env))
    if config is not None:
        checks += _benchmark(config)
    if config is not None and config.executor.kind == "ray":
        checks.append(_module("ray", "ray", required=True, hint="pip install 'saddler[ray]'"))
    return checks


def healthy(checks: list[Check]) -> bool:
    """True when every required check holds."""
    return all(c.ok for c in checks if c.required)


def _python() -> Check:
    ok = sys.version_info >= (3, 11)
    found = ".".join(str(v) for v in sys.version_info[:3])
    return Check("python", ok, True, f"Python {found}" + ("" if ok else " (3.11 or newer is needed)"))


def _sandbox(executor: ExecutorConfig, resolve: Callable[[ExecutorConfig], Sandbox]) -> Check:
    """What rollouts will run in, and what it leaves open: not ok (a warning) unless bubblewrap contains them;
    required only when a sandbox was asked for by name and this machine lacks it."""
    try:
        box = resolve(executor)
    except ExecutorError as exc:
        return Check("rollout sandbox", False, True, str(exc))
    detail = box.describe() + ("" if box.mode == "bwrap" else f"; {BWRAP_HINT}")
    return Check("rollout sandbox", box.mode == "bwrap", False, detail)


def _module(name: str, module: str, *, required: bool, hint: str) -> Check:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return Check(name, False, required, f"{module} cannot be imported; {hint}")
    return Check(name, True, required, f"{module} {getattr(mod, '__version__', '(unknown version)')}")


def _task_key(config: RunConfig, env: Mapping[str, str]) -> Check:
    """claude-tasks rollouts call the API from child processes that see only `executor.env_allow`."""
    passed = [v for v in ("ANTHROPIC_API_KEY", OAUTH_VARIABLE) if v in config.executor.env_allow and env.get(v)]
    if passed:
        return Check("rollout key", True, True, f"{passed[0]} is passed to rollouts")
    return Check(
        "rollout key", False, True, "claude-tasks rollouts need ANTHROPIC_API_KEY set and listed in executor.env_allow"
    )


def _benchmark(config: RunConfig) -> list[Check]:
    """What the benchmark's own `check()` finds missing (a CLI, a key, a dataset), one failed check each; a
    benchmark that cannot even be built from its options fails here rather than at `saddler run`."""
    from saddler.benchmark import build_benchmark

    name = f"benchmark:{config.benchmark}"
    try:
        plugin = build_benchmark(config.benchmark, config.benchmark_options)
    except Exception as exc:  # a plugin's constructor may raise anything; the doctor reports it
        return [Check(name, False, True, f"cannot be built from benchmark_options: {exc}")]
    check = getattr(plugin, "check", None)
    checks = [Check(name, False, True, str(p)) for p in (check() if callable(check) else [])]
    needs = getattr(plugin, "rollout_needs", None)
    if callable(needs):
        gaps = rollout_gaps(needs(), config.executor, os.environ)
        checks += [Check("rollout needs", False, True, f"executor.{key}: {why}") for key, why in gaps]
        if not gaps and (needs().network or needs().env):
            checks.append(Check("rollout needs", True, True, f"network and variables passed ({needs().why})"))
    return checks


def _evo_dag(which: Callable[[str], str | None]) -> Check:
    local = Path(sys.executable).parent / "evo-dag"
    path = str(local) if local.is_file() else which("evo-dag")
    if path is None:
        return Check("evo-dag", False, False, "evo-dag not found; sessions cannot query history (pip install saddler)")
    return Check("evo-dag", True, False, path)

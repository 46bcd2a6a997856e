"""A run folder: its layout, its creation (`saddler init`) and its single-writer lock.

RUN/saddler.toml      [run] config          RUN/evodag.sqlite  the EvoDAG
RUN/harness/          the run's own clone   RUN/worktrees/     candidate worktrees
RUN/traces/           rollout traces        RUN/sessions/      session transcripts
RUN/best/             exported best harness RUN/report.md, results.tsv, progress.png
RUN/PAUSE, RUN/STOP   sentinels honoured at iteration boundaries
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saddler.errors import RunStateError

TEMPLATE_BENCHMARKS = {"opsdesk": "opsdesk", "claude_agent": "claude-tasks", "skill": "skill-evals"}

# Per-template defaults. opsdesk: about half of 30 iterations in the Capability phase, as in the paper's GAIA2
# schedule (25 of 50); with 40 train tasks in batches of 6 that is two epochs. Finishes in under a minute.
TEMPLATE_RUN_DEFAULTS: dict[str, dict[str, Any]] = {
    "opsdesk": {
        "loop": {"batch_size": 6, "max_iterations": 30},
        "policies": {"capability_epochs": 2.0},
        "executor": {"workers": 2, "timeout_s": 30.0},
    },
    # claude-tasks rollouts call the API: the key must pass the executor's environment allow-list, and the
    # sandbox must let them reach the network.
    "claude_agent": {
        "executor": {
            "env_allow": ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONPATH", "ANTHROPIC_API_KEY"],
            "network": True,
        }
    },
}


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "saddler.toml"

    @property
    def db(self) -> Path:
        return self.root / "evodag.sqlite"

    def harness(self, rel: str = "harness") -> Path:
        return self.root / rel

    @property
    def worktrees(self) -> Path:
        return self.root / "worktrees"

    @property
    def traces(self) -> Path:
        return self.root / "traces"

    @property
    def sessions(self) -> Path:
        return self.root / "sessions"

    @property
    def best(self) -> Path:
        return self.root / "best"

    @property
    def report(self) -> Path:
        return self.root / "report.md"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} to TOML")


def render_run_toml(run: dict[str, Any]) -> str:
    """Write a `[run]` table (with nested sub-tables) as TOML text."""
    lines = ["[run]"]
    tables = {k: v for k, v in run.items() if isinstance(v, dict)}
    lines += [f"{k} = {_toml_value(v)}" for k, v in run.items() if not isinstance(v, dict)]
    for name, table in tables.items():
        lines += ["", f"[run.{name}]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def init_run(
    run_dir: Path,
    *,
    template: str | None = None,
    harness: Path | None = None,
    benchmark: str | None = None,
    backend: str = "offline",
    seed: int = 0,
    force: bool = False,
    overrides: dict[str, Any] | None = None,
) -> Path:
    """Create a run folder from a bundled template or the user's harness repo; return its saddler.toml."""
    from saddler.benchmark import BENCHMARKS, is_known_benchmark
    from saddler.errors import ConfigError, UnknownNameError
    from saddler.harness.space import HarnessSpace
    from saddler.resources import template_path

    if (template is None) == (harness is None):
        raise ConfigError("give exactly one of --template NAME or --harness PATH")
    paths = RunPaths(Path(run_dir))
    if paths.root.exists() and any(paths.root.iterdir()):
        if not force:
            raise RunStateError(f"{paths.root} is not empty; pass --force to replace it")
        shutil.rmtree(paths.root)
    source = template_path(template) if template else Path(harness).expanduser().resolve()  # type: ignore[arg-type]
    if not source.exists():
        raise ConfigError(f"--harness {source}: no such folder")
    bench = benchmark or TEMPLATE_BENCHMARKS.get(template or "", "")
    if not bench:
        raise ConfigError("--benchmark NAME is required with --harness")
    if not is_known_benchmark(bench):
        raise UnknownNameError("benchmark", bench, [*BENCHMARKS, "package.module:Class"])
    paths.root.mkdir(parents=True, exist_ok=True)
    HarnessSpace.create(source, paths.harness(), paths.worktrees, clock=lambda: 946684800)
    run: dict[str, Any] = {"name": paths.root.resolve().name, "seed": seed, "benchmark": bench, "harness": "harness"}
    for key, table in TEMPLATE_RUN_DEFAULTS.get(template or "", {}).items():
        run[key] = dict(table)
    run.setdefault("sessions", {})["backend"] = backend
    for key, value in (overrides or {}).items():
        if isinstance(value, dict):
            run.setdefault(key, {}).update(value)
        else:
            run[key] = value
    paths.config.write_text(render_run_toml(run), encoding="utf-8")
    from saddler.config import load_run_config

    load_run_config(paths.root)  # fail now, not later, on a bad override
    return paths.config


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run folder's writer lock; a second `saddler run` on it fails fast."""
    path = Path(run_dir) / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RunStateError(f"{run_dir} is being run by another process (lock {path})") from exc
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        os.close(fd)

"""The environment a rollout child gets: scrubbed variables, the PYTHONPATH it needs, where private folders go.

Only allow-listed names pass from the optimizer's environment; secrets never do. The child also gets a
private HOME/TMPDIR and a unique marker variable by which every process it starts can be found later.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from saddler.benchmark import RolloutNeeds
from saddler.config import ExecutorConfig

MARKER_VAR = "SADDLER_ROLLOUT_MARKER"


def _package_root(module: str) -> str | None:
    """The sys.path entry a top-level package is imported from, found without importing it."""
    top = module.split(".", 1)[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return str(Path(next(iter(spec.submodule_search_locations))).parent)
    return str(Path(spec.origin).parent) if spec.origin else None


def private_base() -> str | None:
    """Where private rollout dirs go: `$SADDLER_ROLLOUT_TMP` if set, else /dev/shm (tmpfs: creating and
    removing a dir per rollout is ~10x cheaper than on a journaled disk), else the default temp dir."""
    chosen = os.environ.get("SADDLER_ROLLOUT_TMP")
    if chosen:
        return chosen
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def private_prefix() -> str:
    """Prefix of this process's private rollout dirs; carries the pid so that a later sweep knows the owner."""
    return f"saddler-rollout-{os.getpid()}-"


def sweep_stale_private_dirs(base: str | None) -> int:
    """Remove private rollout dirs left behind by optimizer processes that died (killed mid-rollout)."""
    root = Path(base) if base else Path(tempfile.gettempdir())
    removed = 0
    for path in root.glob("saddler-rollout-*-*"):
        owner = path.name.split("-")[2]
        if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


@functools.lru_cache(maxsize=64)
def _roots(benchmark: str) -> tuple[str | None, str | None]:
    from saddler.benchmark import BENCHMARKS

    module = benchmark.partition(":")[0] if ":" in benchmark else BENCHMARKS.get(benchmark, "").partition(":")[0]
    return _package_root("saddler"), _package_root(module) if module else None


def child_pythonpath(benchmark: str, inherited: str | None) -> str:
    """PYTHONPATH for the child: where saddler and the benchmark's package live (works from a source
    checkout as well as an install), then the inherited value when the allow-list passes it."""
    entries = list(_roots(benchmark))
    if inherited:
        entries.extend(inherited.split(os.pathsep))
    seen: list[str] = []
    for entry in entries:
        if entry and entry not in seen:
            seen.append(entry)
    return os.pathsep.join(seen)


def scrubbed_env(config: ExecutorConfig, benchmark: str, marker: str) -> dict[str, str]:
    """The child's environment: allow-listed names only, marker, PYTHONPATH; its private HOME/TMPDIR are added
    by the caller once the folder exists (`home_env`)."""
    env = {name: os.environ[name] for name in config.env_allow if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env["PYTHONPATH"] = child_pythonpath(benchmark, env.get("PYTHONPATH"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env[MARKER_VAR] = marker
    return env


def rollout_gaps(needs: RolloutNeeds, config: ExecutorConfig, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """What `[run.executor]` (and the environment it passes on) lacks for rollouts that need `needs`: (dotted key
    under `run.executor`, what is wrong and what to do); empty when nothing is missing."""
    why = f" ({needs.why})" if needs.why else ""
    gaps = []
    if needs.network and not config.network:
        gaps.append(("network", f"the benchmark's rollouts call the network{why}; with executor.network = false "
                                "they hang until executor.timeout_s: set executor.network = true"))  # fmt: skip
    for name in (*needs.env, *needs.optional_env):
        if name not in config.env_allow and (name in needs.env or environ.get(name)):
            gaps.append(("env_allow", f"the benchmark's rollouts read {name}{why} but executor.env_allow does not "
                                      f"pass it: add {name!r} to executor.env_allow"))  # fmt: skip
    for name in needs.env:
        if not environ.get(name):
            gaps.append(("env", f"{name} is not set{why}: export it before saddler run"))
    return gaps


def apply_needs(executor: dict[str, Any], needs: RolloutNeeds, environ: Mapping[str, str]) -> list[str]:
    """Set in a new run's `[run.executor]` table what the benchmark's rollouts need and the user left unset: the
    network, and every variable of `needs` on the allow-list (optional ones when set here). Returns what it set,
    one phrase each (for `saddler init` to say)."""
    done = []
    if needs.network and "network" not in executor:
        executor["network"] = True
        done.append("executor.network = true")
    allow = list(executor.get("env_allow", ExecutorConfig().env_allow))
    added = [n for n in (*needs.env, *needs.optional_env) if n not in allow and (n in needs.env or environ.get(n))]
    if added:
        executor["env_allow"] = allow + added
        done.append(f"executor.env_allow += {', '.join(added)}")
    return done


def batch_env(config: ExecutorConfig, benchmark: str) -> dict[str, str]:
    """The environment of a batch a benchmark runs itself (`BatchBenchmark`): a rollout's, without a private
    HOME (the outside runner keeps its caches in the user's)."""
    return scrubbed_env(config, benchmark, f"batch-{os.getpid()}")


def home_env(home: str) -> dict[str, str]:
    """HOME and the temp-folder variables (TMPDIR, TMP, TEMP), all pointing at the private folder `home`."""
    return {"HOME": home, "TMPDIR": home, "TMP": home, "TEMP": home}

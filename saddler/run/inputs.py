"""What a run's results depend on, recorded when it starts and checked each time it resumes.

The fingerprint is a flat dict of dotted keys: every `[run]` setting except budgets and resources (they decide
how long or how fast the search runs, not what it finds: see `MAY_CHANGE`), the content of prompt override
files, the harness baseline commit and the benchmark's fingerprints. `saddler run` on a folder whose inputs
changed stops with exit 2 naming the changed keys, unless `--allow-changed`: then the change is recorded as a
`run.inputs_changed` event and the new inputs become the run's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from saddler.config import RunConfig
from saddler.errors import ChangedInputsError
from saddler.run.context import RunContext

MAY_CHANGE = frozenset({
    "name", "loop.max_iterations", "loop.max_rollouts", "loop.cost_cap_usd", "loop.target_dev_score",
    "loop.stall_limit", "executor.kind", "executor.workers", "executor.ray_address", "executor.cache",
    "minimize.enabled", "minimize.max_rollouts",
})  # fmt: skip
"""Settings that do not change what a run finds: budgets and stop conditions, where rollouts execute, and the
minimization at its end (it adds nodes after the search, never changes the search)."""


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"loop": {"batch_size": 6}} -> {"loop.batch_size": 6} (lists and scalars are leaves)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{dotted}."))
        else:
            out[dotted] = value
    return out


def config_inputs(config: dict[str, Any]) -> dict[str, Any]:
    """The results-affecting settings of a `[run]` table (as `RunConfig.model_dump()` gives it)."""
    return {k: v for k, v in flatten(config).items() if k not in MAY_CHANGE}


def fingerprint(
    cfg: RunConfig, run_dir: Path, baseline_commit: str, bench_fp: str, model_fp: str, score_kind: str | None = None
) -> dict[str, Any]:
    """Every results-affecting input of a run, by dotted key. `score_kind` is `policies.score` as resolved for the
    benchmark (`auto` names the benchmark's own kind; the run's stored config holds the resolved one)."""
    found = config_inputs(cfg.model_dump(mode="json"))
    if score_kind is not None:
        found["policies.score"] = score_kind
    for name, path in sorted(cfg.sessions.prompts.items()):
        file = Path(path).expanduser()
        file = file if file.is_absolute() else run_dir / file
        found[f"sessions.prompts.{name}.sha256"] = (
            hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else "missing"
        )
    found["harness.baseline_commit"] = baseline_commit
    found["benchmark.fingerprint"] = bench_fp
    found["benchmark.model_fingerprint"] = model_fp
    return found


def changes(old: dict[str, Any], new: dict[str, Any], keys: set[str] | None = None) -> dict[str, list[Any]]:
    """Key -> [old, new] for every key (of `keys`, else of either side) whose value differs."""
    names = keys if keys is not None else set(old) | set(new)
    return {k: [old.get(k), new.get(k)] for k in sorted(names) if old.get(k) != new.get(k)}


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_inputs(ctx: RunContext, allow_changed: bool, say: Callable[[str], None]) -> None:
    """Record the run's inputs on its first start; on a resume compare them (see the module docstring).

    A run recorded before inputs were kept is compared on its config only (`runs.config`)."""
    run = ctx.store.get_run(ctx.run_id)
    current = fingerprint(
        ctx.cfg, ctx.paths.root, ctx.space.baseline_commit(), ctx.benchmark.fingerprint(),
        ctx.benchmark.model_fingerprint(), ctx.score_kind,
    )  # fmt: skip
    if run.inputs is not None:
        changed = changes(run.inputs, current)
    else:
        recorded = config_inputs(run.config)
        changed = changes(recorded, current, set(recorded) | set(config_inputs(ctx.cfg.model_dump(mode="json"))))
    if changed and not allow_changed:
        listed = "; ".join(f"{k}: {_show(a)} -> {_show(b)}" for k, (a, b) in changed.items())
        raise ChangedInputsError(
            f"the inputs of this run changed since it started ({listed}); resuming would mix results of different "
            f"settings in one EvoDAG. Restore them, or run `saddler run {ctx.paths.root} --allow-changed` to go on "
            "with the new ones (the change is recorded), or branch with `saddler fork`",
            list(changed),
        )
    if changed:
        ctx.store.log_event("run.inputs_changed", {"changed": changed}, run_id=ctx.run_id)
        say(f"inputs changed (allowed, recorded): {', '.join(changed)}")
    if changed or run.inputs is None:
        ctx.store.update_run(ctx.run_id, inputs=current)

"""A run folder: its layout, its creation (`saddler init`) and its single-writer lock.

RUN/saddler.toml      [run] config          RUN/evodag.sqlite  the EvoDAG
RUN/harness/          the run's own clone   RUN/worktrees/     candidate worktrees
RUN/traces/           train rollout traces  RUN/heldout/       dev and test rollout traces
RUN/sessions/         session transcripts and the session view of the EvoDAG (`evodag.view`)
RUN/best/             exported best harness RUN/report.md, results.tsv, progress.png
RUN/PAUSE, RUN/STOP   sentinels honoured at iteration boundaries
RUN/.lock             the single-writer lock (`saddler.runlock`)

Sessions may read only `RunPaths.session_readable` of it: held-out data (the full EvoDAG, dev and test traces, the
report and the export, which hold test scores) is sealed from them.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from saddler.errors import ConfigError, FolderRefusedError, UncommittedHarnessError
from saddler.files import remove_path
from saddler.harness.gitcmd import logical_commit_time
from saddler.runlock import run_lock

if TYPE_CHECKING:
    from saddler.run.harness_check import HarnessSource

__all__ = ["RunPaths", "init_run", "merge_overrides", "render_run_toml", "run_lock"]

TEMPLATE_BENCHMARKS = {
    "opsdesk": "opsdesk",
    "repofix": "repofix",
    "claude_agent": "claude-tasks",
    "skill": "skill-evals",
    "inspect_agent": "inspect",
}

# Per-template defaults. opsdesk and repofix: about half of 30 iterations in the Capability phase, as in the
# paper's GAIA2 schedule (25 of 50); with 40 train tasks in batches of 6 that is two epochs. The two bundled
# offline benchmarks share the schedule on purpose: a default is compared on both alike.
_SIMULATED_DEFAULTS: dict[str, dict[str, Any]] = {
    "loop": {"batch_size": 6, "max_iterations": 30},
    "policies": {"capability_epochs": 2.0},
    "executor": {"workers": 2, "timeout_s": 30.0},
}
TEMPLATE_RUN_DEFAULTS: dict[str, dict[str, Any]] = {
    "opsdesk": _SIMULATED_DEFAULTS,
    "repofix": _SIMULATED_DEFAULTS,
    # claude-tasks rollouts call the API: the key must pass the executor's environment allow-list, and the
    # sandbox must let them reach the network.
    "claude_agent": {
        "executor": {
            "env_allow": ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONPATH", "ANTHROPIC_API_KEY"],
            "network": True,
        }
    },
    # inspect_agent: the example Inspect task ships in the template (protected); `{harness}` is the run's clone.
    # The task model is the user's choice: --set 'benchmark_options.model="anthropic/claude-sonnet-4-5"'.
    "inspect_agent": {
        "benchmark_options": {"task": "{harness}/eval/word_problems.py@word_problems", "solver": "agent.py@agent"},
        "executor": {
            "env_allow": ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONPATH", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
            "timeout_s": 600.0,
        },
    },
    # a SKILL.md has nothing but steering to edit: no Capability phase
    "skill": {"policies": {"phases": "none"}},
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
        """The run's own clone of the harness, `run.harness` (`rel`) inside the run folder. Anything that leads
        outside it (an absolute path, `..`, a symlink) is a `ConfigError` naming `run.harness`: saddler commits
        candidates into this clone, never into a repository of the user's."""
        path = self.root / rel
        root, resolved = self.root.resolve(), path.resolve()
        if root not in resolved.parents:
            raise ConfigError(
                f"saddler.toml: run.harness = {rel!r} is {resolved}, outside the run folder {root}; run.harness "
                "names the run's own clone of your harness inside the run folder ('harness', made by `saddler "
                "init --harness PATH`), so that your repository is never written to"
            )
        return path

    @property
    def worktrees(self) -> Path:
        return self.root / "worktrees"

    @property
    def traces(self) -> Path:
        return self.root / "traces"

    @property
    def heldout(self) -> Path:
        """Dev and test traces: never shown to a session (`session_readable`)."""
        return self.root / "heldout"

    def trace_root(self, split: str) -> Path:
        """Where the traces of `split` go: `traces/` for train, `heldout/` for dev and test."""
        return self.traces if split == "train" else self.heldout

    @property
    def sessions(self) -> Path:
        return self.root / "sessions"

    @property
    def session_db(self) -> Path:
        """The session view of the EvoDAG (`evodag.view`): what sessions query, refreshed before each session."""
        return self.sessions / "evodag-view.sqlite"

    def session_readable(self, harness: str = "harness") -> list[Path]:
        """What a session may read of the run folder: its config, the harness clone and its worktrees, the train
        traces and the transcripts with the session view. Nothing else, so nothing held out."""
        return [self.config, self.harness(harness), self.worktrees, self.traces, self.sessions]

    @property
    def best(self) -> Path:
        return self.root / "best"

    @property
    def report(self) -> Path:
        return self.root / "report.md"


def render_run_toml(run: dict[str, Any]) -> str:
    """A `[run]` table (nested tables at any depth) as TOML text."""
    return tomli_w.dumps({"run": run})


def merge_overrides(run: dict[str, Any], overrides: dict[str, Any], prefix: str = "run") -> None:
    """Deep-merge `--set` overrides into `run`; setting a key below a value that is not a table is a
    `ConfigError` naming it (`--set seed.x=3: run.seed is not a table`)."""
    for key, value in overrides.items():
        if isinstance(value, dict):
            current = run.setdefault(key, {})
            if not isinstance(current, dict):
                path = f"{prefix}.{key}"
                raise ConfigError(f"--set {path.removeprefix('run.')}.{_first_leaf(value)}: {path} is not a table")
            merge_overrides(current, value, f"{prefix}.{key}")
        else:
            run[key] = value


def _first_leaf(table: dict[str, Any]) -> str:
    key, value = next(iter(table.items()))
    return f"{key}.{_first_leaf(value)}" if isinstance(value, dict) and value else f"{key}={value!r}"


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
    include_uncommitted: bool = False,
    warm_start: Path | None = None,
    say: Callable[[str], None] | None = None,
) -> Path:
    """Create a run folder from a bundled template or the user's harness repo; return its saddler.toml.

    Everything is checked first (the config with every override, the benchmark and its options, the backend,
    the harness's saddler.toml and files): a problem is a `ConfigError` listing each by dotted path, and
    nothing is created or changed. `force` replaces an existing run folder, under its run lock: a folder
    another process is running is refused (`RunStateError`), and so is a non-empty folder that holds no run
    (`FolderRefusedError`, exit 2). A harness repository with uncommitted changes is refused
    (`UncommittedHarnessError` naming the files, exit 2) unless
    `include_uncommitted`, which commits them in the run's clone as the baseline and says so through `say`.
    `warm_start` names another run whose history the new run starts from (`saddler.run.warmstart.prepare`: a
    harness or benchmark mismatch is refused unless `force`, and nothing is created).
    """
    from saddler.harness.space import HarnessSpace
    from saddler.resources import template_path

    if (template is None) == (harness is None):
        raise ConfigError("give exactly one of --template NAME or --harness PATH")
    paths = RunPaths(Path(run_dir))
    source = template_path(template) if template else Path(harness).expanduser().resolve()  # type: ignore[arg-type]
    if not source.is_dir():
        what = "is a file, not a folder" if source.exists() else "no such folder"
        raise ConfigError(f"--harness {source}: {what}; pass the folder of your harness (a git repository)")
    bench = benchmark or TEMPLATE_BENCHMARKS.get(template or "", "")
    if not bench:
        raise ConfigError("--benchmark NAME is required with --harness")
    run: dict[str, Any] = {"name": paths.root.resolve().name, "seed": seed, "benchmark": bench, "harness": "harness"}
    clone = str(paths.harness().resolve())
    for key, table in TEMPLATE_RUN_DEFAULTS.get(template or "", {}).items():
        run[key] = {k: v.replace("{harness}", clone) if isinstance(v, str) else v for k, v in table.items()}
    run.setdefault("sessions", {})["backend"] = backend
    overrides = overrides or {}
    if "harness" in overrides:
        raise ConfigError(
            f"--set harness={overrides['harness']!r}: run.harness is the folder saddler init clones the harness "
            "into, always 'harness'; it cannot be set"
        )
    merge_overrides(run, overrides)
    _absolute_prompts(run)
    notes = _benchmark_settings(run)
    state = _source_state(source, paths.root) if harness is not None else None
    _check_new_run(run, source, "template" if template else "--harness", state, include_uncommitted)
    refused = state.problems(include_uncommitted) if state is not None else []
    if refused:
        raise UncommittedHarnessError(f"--harness {refused[0]}")
    dirty = state.uncommitted if state is not None else []

    existed = paths.root.exists()
    if existed and any(paths.root.iterdir()):
        if not force:
            raise FolderRefusedError(f"{paths.root} is not empty; pass --force to replace it")
        if not _holds_a_run(paths):
            raise FolderRefusedError(
                f"{paths.root} is not a saddler run folder (no saddler.toml [run], no evodag.sqlite); refusing to "
                "delete it with --force: choose a new or empty folder"
            )
    paths.root.mkdir(parents=True, exist_ok=True)
    changed = False
    try:
        with run_lock(paths.root):
            changed = True
            for child in paths.root.iterdir():
                if child.name != ".lock":
                    remove_path(child)
            HarnessSpace.create(
                source, paths.harness(), paths.worktrees, clock=lambda: logical_commit_time(0), uncommitted=dirty
            )
            paths.config.write_text(render_run_toml(run), encoding="utf-8")
            if warm_start is not None:
                from saddler.run.warmstart import prepare

                accepted = prepare(paths.root, warm_start, force)
                if accepted and say is not None:
                    say(f"--warm-start {warm_start}: imported despite differing {'; '.join(accepted)} (--force)")
    except BaseException:
        if not existed:
            shutil.rmtree(paths.root, ignore_errors=True)
        elif changed:
            for child in paths.root.iterdir():
                remove_path(child)
        raise
    if say is not None and state is not None and not state.repo:
        say(
            f"--harness {source} is not a git repository (or not its top folder): its files as they are now were "
            f"committed as the baseline of the run's clone {paths.harness()}; {source} itself is not changed"
        )
    if dirty and say is not None:
        from saddler.run.harness_check import listing

        say(f"included {len(dirty)} uncommitted file(s) of {source} in the run's baseline commit: {listing(dirty)}")
    for note in notes:
        if say is not None:
            say(note)
    return paths.config


def _benchmark_settings(run: dict[str, Any]) -> list[str]:
    """Fill in what the benchmark's rollouts need and the user left unset (`RolloutNeeds`: the network, the
    variables to pass) and say what the run should know: what init set, and that the offline backend has nothing
    to patch with when the benchmark ships no patch bank. A benchmark that cannot be built is left to the checks."""
    from saddler.benchmark import load_benchmark
    from saddler.executor.environment import apply_needs

    try:
        bench = load_benchmark(run["benchmark"], run.get("benchmark_options") or {})
        needs, bank = bench.rollout_needs(), bench.patch_bank()
    except Exception:  # a plugin may raise anything here; `_check_new_run` reports it as a config error
        return []
    notes = []
    executor = dict(run.get("executor") or {})
    done = apply_needs(executor, needs, os.environ)
    if done:
        run["executor"] = executor
        notes.append(f"set {'; '.join(done)}: {needs.why or 'the benchmark says its rollouts need it'}")
    if run.get("sessions", {}).get("backend") == "offline" and not bank:
        notes.append(
            f"note: the offline backend patches only benchmarks that ship a patch bank, and {bench.name} has none: "
            "every offline diagnosis will be no_patch. Use --backend claude or command, or give the benchmark "
            'symptoms() and patch_bank() (docs/your-harness.md: "Offline patches for your own benchmark")'
        )
    return notes


def _source_state(source: Path, run_root: Path) -> HarnessSource:
    from saddler.run.harness_check import harness_source

    return harness_source(source, exclude=run_root)


def _absolute_prompts(run: dict[str, Any]) -> None:
    """A relative prompt-template path given to `init` names a file of the current folder: write it absolute
    (the run folder does not exist yet, so it cannot be meant relative to it)."""
    prompts = run.get("sessions", {}).get("prompts")
    if not isinstance(prompts, dict):
        return
    for role, value in prompts.items():
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            prompts[role] = str((Path.cwd() / Path(value).expanduser()).resolve())


def _check_new_run(
    run: dict[str, Any], source: Path, flag: str, state: HarnessSource | None, include_uncommitted: bool
) -> None:
    from pydantic import ValidationError

    from saddler.config import RunConfig, format_validation_error, parse_saddler_file, read_toml
    from saddler.run.harness_check import check_harness, harness_files
    from saddler.run.preflight import check_run

    try:
        cfg = RunConfig.model_validate(run)
    except ValidationError as exc:
        lines = format_validation_error(exc, "run")
        raise ConfigError(f"saddler.toml: {len(lines)} error(s)\n" + "\n".join(f"  {line}" for line in lines)) from exc
    errors, _ = check_run(cfg, Path.cwd(), ask_tasks=False)
    label = f"{flag} {source}" if flag == "--harness" else f"template {source.name}"
    if not (source / "saddler.toml").is_file():
        errors.append(
            f"{label}: no saddler.toml; add one with [harness.components] saying which files are capability, "
            "steering and protected (see README)"
        )
    else:
        harness = parse_saddler_file(read_toml(source / "saddler.toml"), f"{label}/saddler.toml").harness
        if harness is None:
            errors.append(f"{label}: its saddler.toml has no [harness] table (see README)")
        else:
            files = state.baseline_files(include_uncommitted) if state is not None else harness_files(source)
            errors += [f"{label}: {line}" for line in check_harness(harness, files, cfg)]
    if errors:
        raise ConfigError(f"cannot create the run: {len(errors)} problem(s)\n" + "\n".join(f"  {e}" for e in errors))


def _holds_a_run(paths: RunPaths) -> bool:
    if paths.db.exists() or (paths.root / ".lock").exists():
        return True
    try:
        return "run" in tomllib.loads(paths.config.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False

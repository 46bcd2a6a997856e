"""Everything checked before a run folder is created, validated or run, so nothing is created or spent on a
config that cannot work. Every problem is one line `dotted.path: what is wrong (what to do)`.

- `check_run`: `[run]` beyond its types: the benchmark imports and accepts its options (asked from its
  constructor's signature) and builds; the batch fits its train split; the backend and prompt templates exist;
  Ray is installed when asked for.
- `check_harness`: a harness has a `saddler.toml`, every component glob matches a file, required files exist,
  and every phase of the schedule has at least one editable file.
- `check_folder`: both, over a run folder (or a harness folder alone): what `saddler validate` prints and what
  `saddler run` refuses to start with.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from saddler.benchmark import (
    SPLITS,
    Benchmark,
    Task,
    benchmark_target,
    complete,
    is_known_benchmark,
    registered_benchmarks,
)
from saddler.config import (
    HarnessConfig,
    RunConfig,
    SaddlerFile,
    format_validation_error,
    parse_saddler_file,
    read_toml,
)
from saddler.errors import ConfigError, SaddlerError, UnknownNameError
from saddler.executor.environment import rollout_gaps
from saddler.harness import components
from saddler.harness.gitcmd import git, is_repo_root
from saddler.policies.phases import NONE, make_phase_schedule
from saddler.run.folder import RunPaths
from saddler.sessions.prompts import TEMPLATES
from saddler.sessions.registry import BACKENDS

_SKIP_DIRS = {".git", "__pycache__"}


def module_available(name: str) -> bool:
    """True when `import name` would find the module (without importing it)."""
    return importlib.util.find_spec(name) is not None


# -- [run] ------------------------------------------------------------------------------------------------


def check_run(cfg: RunConfig, run_dir: Path | None, *, ask_tasks: bool = True) -> tuple[list[str], Benchmark | None]:
    """Problems of a validated `[run]` (dotted paths under `run.`) and the benchmark built from it (None when
    it cannot be built). Prompt files are looked up relative to `run_dir` (skipped when None). With `ask_tasks`
    the benchmark's `tasks()` is called for every split and what it returns checked (`init` cannot: a template's
    task file may be inside the harness clone it has not made yet)."""
    errors: list[str] = []
    bench, bench_errors = _benchmark(cfg.benchmark, cfg.benchmark_options)
    errors += bench_errors
    explicit = cfg.policies.sampler != "full" and "batch_size" in cfg.loop.model_fields_set
    train = None
    if bench is not None and ask_tasks:
        train = _task_errors(bench, errors)
    elif bench is not None and explicit:
        try:
            train = len(bench.tasks("train"))
        except (SaddlerError, ValueError, OSError) as exc:
            errors.append(f"run.benchmark: cannot list its train tasks: {exc}")
    if bench is not None:
        gaps = rollout_gaps(bench.rollout_needs(), cfg.executor, os.environ)
        errors += [f"run.executor.{key}: {why}" for key, why in gaps if key != "env"]  # env: the doctor's
    if train is not None and explicit and cfg.loop.batch_size > train:
        errors.append(
            f"run.loop.batch_size: {cfg.loop.batch_size} is more than the benchmark's {train} train task(s); use "
            f"at most {train}"
        )
    if cfg.sessions.backend not in BACKENDS:
        errors.append(f"run.sessions.backend: {UnknownNameError('backend', cfg.sessions.backend, list(BACKENDS))}")
    for role, path in cfg.sessions.prompts.items():
        if role not in TEMPLATES:
            errors.append(f"run.sessions.prompts.{role}: unknown prompt template; known: {', '.join(TEMPLATES)}")
        elif run_dir is not None and not _resolve(path, run_dir).is_file():
            errors.append(f"run.sessions.prompts.{role}: no such file {_resolve(path, run_dir)}")
    if cfg.executor.kind == "ray" and not module_available("ray"):
        errors.append(
            "run.executor.kind: ray is not installed; pip install 'saddler[ray]' or set executor.kind = \"local\""
        )
    return errors, bench


def _task_errors(bench: Benchmark, errors: list[str]) -> int | None:
    """Call the benchmark's `tasks(split)` for every split as the run will, and check what comes back: a list of
    `Task`s of that split. Appends what is wrong to `errors`; returns the number of train tasks (None: unknown)."""
    train = None
    for split in SPLITS:
        try:
            tasks = bench.tasks(split)
        except Exception as exc:  # the plugin's own code: say what it raised, not a traceback
            errors.append(f"run.benchmark: tasks({split!r}) raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(tasks, list | tuple):
            errors.append(f"run.benchmark: tasks({split!r}) returned {type(tasks).__name__}, not a list of Task")
            continue
        wrong = [t for t in tasks if not isinstance(t, Task)]
        if wrong:
            errors.append(
                f"run.benchmark: tasks({split!r}) returned {type(wrong[0]).__name__} {str(wrong[0])[:80]!r}, not a "
                f"saddler.benchmark.Task: return Task(id=..., group=..., split={split!r}) for each task"
            )
            continue
        other = [t.id for t in tasks if t.split != split]
        if other:
            errors.append(f"run.benchmark: tasks({split!r}) returned tasks of another split: {', '.join(other[:5])}")
        if split == "train":
            train = len(tasks)
    return train


def _resolve(path: str, base: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def _benchmark(name: str, options: dict[str, Any]) -> tuple[Benchmark | None, list[str]]:
    if not is_known_benchmark(name):
        known = [*registered_benchmarks(), "package.module:Class"]
        return None, [f"run.benchmark: {UnknownNameError('benchmark', name, known)}"]
    module_name, _, attr = benchmark_target(name).partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        return None, [f"run.benchmark: cannot import {name!r}: {exc}; install it or fix the module path"]
    except AttributeError:
        return None, [f"run.benchmark: module {module_name!r} has no {attr!r}; fix the class name"]
    problems = _option_errors(name, cls, options)
    if problems:
        return None, problems
    try:
        return complete(cls(**options)), []
    except (SaddlerError, TypeError, ValueError, OSError) as exc:
        return None, [f"run.benchmark_options: benchmark {name!r} refuses its options: {exc}"]


def _option_errors(name: str, cls: type, options: dict[str, Any]) -> list[str]:
    """Unknown and missing options, by the benchmark constructor's own signature."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    named = {k: p for k, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    accepted = ", ".join(named) or "none"
    errors = [
        f"run.benchmark_options.{key}: not an option of benchmark {name!r} (accepted: {accepted})"
        for key in options
        if key not in named
    ]
    errors += [
        f"run.benchmark_options.{key}: required by benchmark {name!r}"
        for key, p in named.items()
        if p.default is inspect.Parameter.empty and key not in options
    ]
    return errors


# -- [harness] --------------------------------------------------------------------------------------------


def harness_files(harness_dir: Path) -> list[str]:
    """The harness's files: tracked at HEAD for a git repository, else every file below the folder."""
    if (harness_dir / ".git").exists() and is_repo_root(harness_dir):
        head = git(["rev-parse", "--verify", "-q", "HEAD"], harness_dir, check=False)
        if head.returncode == 0:
            out = git(["ls-tree", "-r", "-z", "--name-only", "HEAD"], harness_dir).stdout
            return sorted(p for p in out.split("\0") if p)
    found = []
    for root, dirs, files in os.walk(harness_dir):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        rel = Path(root).relative_to(harness_dir)
        found += [(rel / f).as_posix() for f in files]
    return sorted(found)


@dataclass(frozen=True)
class HarnessSource:
    """What `saddler init --harness SOURCE` finds of SOURCE's git state (SOURCE is only read): whether it is a
    repository's top folder (else a plain folder: its files are committed as the baseline of the run's clone),
    whether that repository has a commit, and its uncommitted files (`saddler.harness.uncommitted`)."""

    path: Path
    repo: bool
    committed: bool
    uncommitted: list[str]

    def problems(self, include_uncommitted: bool = False) -> list[str]:
        """What `init` refuses: a repository without a commit; uncommitted files unless they are included."""
        if self.repo and not self.committed:
            return [f"{self.path} has no commits; commit the harness once before optimizing it"]
        if self.uncommitted and not include_uncommitted:
            return [
                f"{self.path} has {len(self.uncommitted)} uncommitted file(s): {listing(self.uncommitted)}. A run "
                "starts from the last commit, so these would be left out: commit them, or pass "
                "--include-uncommitted to make them part of the run's baseline (your repository is not changed)"
            ]
        return []

    def baseline_files(self, include_uncommitted: bool) -> list[str]:
        """The files the run's baseline commit will hold: HEAD's (with `include_uncommitted`, as the working tree
        has them: new and changed files in, deleted ones out); every file of a plain folder."""
        files = set(harness_files(self.path))
        if self.repo and include_uncommitted:
            for rel in self.uncommitted:
                (files.add if (self.path / rel).is_file() else files.discard)(rel)
        return sorted(files)


def harness_source(source: Path, exclude: Path | None = None) -> HarnessSource:
    """The git state of the harness folder `source`; uncommitted paths inside `exclude` (the run folder being
    made) are not counted."""
    from saddler.harness.uncommitted import uncommitted_files

    source = Path(source)
    if not is_repo_root(source):
        return HarnessSource(source, False, False, [])
    committed = git(["rev-parse", "--verify", "-q", "HEAD"], source, check=False).returncode == 0
    dirty = uncommitted_files(source, exclude=exclude) if committed else []
    return HarnessSource(source, True, committed, dirty)


def listing(files: list[str], limit: int = 20) -> str:
    """`a, b, c and 5 more`: at most `limit` paths named."""
    shown = ", ".join(files[:limit])
    return shown + (f" and {len(files) - limit} more" if len(files) > limit else "")


def check_harness(harness: HarnessConfig, files: list[str], cfg: RunConfig | None) -> list[str]:
    """Globs that match no file, missing required files, and phases (of `cfg`'s schedule, when given) with no
    editable file. Dotted paths under `harness.`."""
    errors: list[str] = []
    comp = harness.components
    for table, key, globs in (
        ("components", "capability", comp.capability),
        ("components", "steering", comp.steering),
        ("components", "protected", comp.protected),
        ("structure", "skill_files", harness.structure.skill_files),
    ):
        for i, pattern in enumerate(globs):
            try:
                hit = any(components.matches(f, [pattern]) for f in files)
            except ConfigError:
                continue  # reported as an invalid glob
            if not hit:
                errors.append(f"harness.{table}.{key}.{i}: {pattern!r} matches no file in the harness")
    errors += [
        f"harness.structure.required_files.{i}: no such file {rel!r} in the harness"
        for i, rel in enumerate(harness.structure.required_files)
        if components.normalize(rel) not in files
    ]
    try:
        kinds = {components.classify(f, comp) for f in files}
    except ConfigError:
        return errors
    phases = _phases(cfg)
    hint = "" if (cfg or RunConfig()).policies.phases == NONE else ', or set run.policies.phases = "none"'

    for phase, allowed in phases:
        if not kinds & set(allowed):
            where = "harness.components." + ("capability" if "capability" in allowed else "steering")
            errors.append(
                f"{where}: no editable file for the {phase} phase (allowed: {', '.join(allowed)}); add globs that "
                f"match files{hint}"
            )
    return errors


def _phases(cfg: RunConfig | None) -> list[tuple[str, tuple[str, ...]]]:
    """(phase, editable kinds) for every phase the run's schedule goes through, in order. The schedule is the
    one the run makes, on a train split of one task: which phases it visits is the same for any non-empty split.
    Without a run config: the schedule of the default one (what `saddler init` makes)."""
    pol = (cfg or RunConfig()).policies
    schedule = make_phase_schedule(
        pol.phases, 1, pol.capability_epochs, pol.steering_allows_capability, pol.phase_transition
    )
    first, last = schedule.phase(0, 0), schedule.phase(math.ceil(schedule.capability_epochs), 1)
    return [(phase, tuple(sorted(schedule.allowed_kinds(phase)))) for phase in dict.fromkeys((first, last))]


# -- a folder ---------------------------------------------------------------------------------------------


@dataclass
class FolderCheck:
    """What `check_folder` looked at (paths relative to the folder) and every error found."""

    checked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no error was found."""
        return not self.errors


def check_folder(folder: Path) -> FolderCheck:
    """Validate a run folder (its [run], its harness's saddler.toml and files, the benchmark) or a harness
    folder alone. Errors are `file: dotted.path: message`."""
    report = FolderCheck()
    folder = Path(folder)
    if folder.is_file() and folder.name == "saddler.toml":
        folder = folder.parent
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "no such folder"
        report.errors.append(f"{folder}: {what}; pass a run folder or a harness folder")
        return report
    data = _check_file(folder, "saddler.toml", report)
    if data is None:
        return report
    if "run" not in data and "harness" not in data:
        report.errors.append("saddler.toml: no [run] or [harness] table; run `saddler init` to create a run folder")
        return report
    run = _validated_run(data)
    if run is not None:
        errors, _bench = check_run(run, folder)
        report.errors += [f"saddler.toml: {line}" for line in errors]
    if "run" in data:
        rel = (run.harness if run else str(data["run"].get("harness", "harness"))).rstrip("/")
        try:
            harness_dir = RunPaths(folder).harness(rel)
        except ConfigError as exc:
            report.errors.append(str(exc))
            return report
        if not harness_dir.is_dir():
            report.errors.append(f"saddler.toml: run.harness: no such folder {rel!r}; run `saddler init` again")
            return report
        _check_harness_folder(harness_dir, f"{rel}/saddler.toml", run, report, setting=f"run.harness = {rel!r}")
    else:
        _check_harness_folder(folder, "saddler.toml", None, report, parsed=data)
        report.errors += [f"{folder}: {line}" for line in harness_source(folder).problems()]
    return report


def _check_harness_folder(
    harness_dir: Path,
    label: str,
    run: RunConfig | None,
    report: FolderCheck,
    parsed: dict[str, Any] | None = None,
    setting: str = "",
) -> None:
    if parsed is None:
        if not (harness_dir / "saddler.toml").is_file():
            report.checked.append(label)
            named = f" (saddler.toml: {setting})" if setting else ""
            report.errors.append(
                f"{label}: no such file{named}; a harness needs a saddler.toml with [harness.components] saying "
                "which files are capability, steering and protected (see README)"
            )
            return
        parsed = _check_file(harness_dir.parent, label, report)
        if parsed is None:
            return
    try:
        harness = parse_saddler_file(parsed, label).harness or HarnessConfig()
    except ConfigError:
        return  # already reported line by line
    if "harness" not in parsed:
        report.errors.append(f"{label}: no [harness] table; add [harness.components] (see README)")
        return
    report.errors += [f"{label}: {line}" for line in check_harness(harness, harness_files(harness_dir), run)]


def _validated_run(data: dict[str, Any]) -> RunConfig | None:
    try:
        parsed = SaddlerFile.model_validate(data)
    except ValidationError:
        return None
    return parsed.run


def _check_file(folder: Path, rel: str, report: FolderCheck) -> dict[str, Any] | None:
    """Parse and validate one saddler.toml; the parsed data (None when it cannot be read at all)."""
    report.checked.append(rel)
    try:
        data = read_toml(folder / rel)
    except ConfigError as exc:
        report.errors.append(f"{rel}: {str(exc).split(': ', 1)[-1]}")
        return None
    try:
        SaddlerFile.model_validate(data)
    except ValidationError as exc:
        report.errors += [f"{rel}: {line}" for line in format_validation_error(exc)]
    report.errors += [f"{rel}: {line}" for line in _glob_errors(data)]
    run = data.get("run")
    if isinstance(run, dict):
        _name_errors(rel, run, report)
    return data


def _name_errors(rel: str, run: dict[str, Any], report: FolderCheck) -> None:
    """Unknown benchmark / backend names even when other keys of [run] are invalid (then `check_run` is skipped)."""
    if _validated_run({"run": run}) is not None:
        return  # check_run reports them
    sessions = run.get("sessions")
    backend = sessions.get("backend", "offline") if isinstance(sessions, dict) else "offline"
    for dotted, kind, name, known in (
        ("run.benchmark", "benchmark", run.get("benchmark", "opsdesk"), registered_benchmarks()),
        ("run.sessions.backend", "backend", backend, BACKENDS),
    ):
        if isinstance(name, str) and name not in known and not (kind == "benchmark" and is_known_benchmark(name)):
            report.errors.append(f"{rel}: {dotted}: {UnknownNameError(kind, name, list(known))}")


def _glob_errors(data: dict[str, Any]) -> list[str]:
    """`harness.<table>.<key>[i]: invalid glob ...` for every glob that does not compile."""
    harness = data.get("harness")
    errors = []
    for table, keys in (("components", ("capability", "steering", "protected")), ("structure", ("skill_files",))):
        section = harness.get(table) if isinstance(harness, dict) else None
        for key in keys:
            globs = section.get(key) if isinstance(section, dict) else None
            for i, pattern in enumerate(globs if isinstance(globs, list) else []):
                if not isinstance(pattern, str):
                    continue
                try:
                    components.glob_regex(pattern)
                except ConfigError as exc:
                    errors.append(f"harness.{table}.{key}.{i}: {str(exc).split(';')[0]}")
    return errors


def require_ok(folder: Path) -> None:
    """Raise `ConfigError` listing every problem `check_folder` finds (what `saddler run` refuses to start on)."""
    report = check_folder(folder)
    if not report.ok:
        lines = "\n".join(f"  {line}" for line in report.errors)
        raise ConfigError(f"{folder} is not ready to run: {len(report.errors)} problem(s)\n{lines}")

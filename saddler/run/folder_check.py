"""The checks of a run folder (or of a harness folder alone): its `saddler.toml` (strict config, valid globs,
known names), then `saddler.run.preflight.check_run` on its `[run]` and `saddler.run.harness_check.check_harness`
on its harness. `check_folder` is what `saddler validate` prints; `require_ok` is what `saddler run` refuses to
start with. Errors are `file: dotted.path: message`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from saddler.benchmark import is_known_benchmark, registered_benchmarks
from saddler.config import (
    HarnessConfig,
    RunConfig,
    SaddlerFile,
    format_validation_error,
    parse_saddler_file,
    read_toml,
)
from saddler.errors import ConfigError, UnknownNameError
from saddler.harness import components
from saddler.run.folder import RunPaths
from saddler.run.harness_check import check_harness, harness_files, harness_source
from saddler.run.preflight import check_run
from saddler.sessions.registry import BACKENDS


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

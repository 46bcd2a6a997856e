"""Set-up commands that spend nothing: `saddler validate DIR` and `saddler list`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from saddler import resources
from saddler.benchmark import BENCHMARKS, is_known_benchmark
from saddler.cli.common import handle_errors, print_json
from saddler.config import SaddlerFile, format_validation_error, read_toml
from saddler.errors import ConfigError, UnknownNameError
from saddler.harness.components import glob_regex
from saddler.sessions.registry import BACKENDS


@dataclass
class FolderCheck:
    """What `validate_folder` looked at (paths relative to the folder) and every error found."""

    checked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no error was found."""
        return not self.errors


def validate_folder(folder: Path) -> FolderCheck:
    """Validate a run folder's saddler.toml ([run], plus the run's harness [harness] when that harness
    exists) or a harness folder's saddler.toml ([harness]). Errors are `file: dotted.path: message`."""
    report = FolderCheck()
    folder = Path(folder)
    if folder.is_file() and folder.name == "saddler.toml":
        folder = folder.parent
    if not folder.is_dir():
        report.errors.append(f"{folder}: no such folder; pass a run folder or a harness folder")
        return report
    data = _check_file(folder, "saddler.toml", report)
    if data is None:
        return report
    if "run" not in data and "harness" not in data:
        report.errors.append("saddler.toml: no [run] or [harness] table; run `saddler init` to create a run folder")
        return report
    run = data.get("run")
    if isinstance(run, dict):
        harness = run.get("harness", "harness")
        if isinstance(harness, str) and (folder / harness / "saddler.toml").is_file():
            _check_file(folder, f"{harness.rstrip('/')}/saddler.toml", report)
    return report


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
        sessions = run.get("sessions")
        backend = sessions.get("backend", "offline") if isinstance(sessions, dict) else "offline"
        for dotted, kind, name, known in (
            ("run.benchmark", "benchmark", run.get("benchmark", "opsdesk"), BENCHMARKS),
            ("run.sessions.backend", "backend", backend, BACKENDS),
        ):
            if isinstance(name, str) and name not in known and not (kind == "benchmark" and is_known_benchmark(name)):
                report.errors.append(f"{rel}: {dotted}: {UnknownNameError(kind, name, list(known))}")
    return data


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
                    glob_regex(pattern)
                except ConfigError as exc:
                    errors.append(f"harness.{table}.{key}.{i}: {str(exc).split(';')[0]}")
    return errors


def listing() -> dict[str, list[dict[str, str]]]:
    """Bundled benchmarks and templates, sorted by name (the `saddler list --json` document)."""
    return {
        "benchmarks": [{"name": n, "description": d} for n, d in resources.benchmarks().items()],
        "templates": [
            {"name": n, "description": resources.template_description(p), "path": str(p)}
            for n, p in resources.templates().items()
        ],
    }


def register(app: typer.Typer) -> None:
    """Add `validate` and `list` to `app`."""

    @app.command("validate")
    @handle_errors
    def validate(
        folder: Path = typer.Argument(..., help="a run folder (its saddler.toml [run]) or a harness folder"),
        as_json: bool = typer.Option(False, "--json", help="print {ok, checked, errors} as JSON"),
    ) -> None:
        """Check saddler.toml files without spending anything; exit 2 and list every error if invalid."""
        report = validate_folder(folder)
        if as_json:
            print_json({"ok": report.ok, "checked": report.checked, "errors": report.errors})
        elif report.ok:
            typer.echo("ok")
        else:
            for line in report.errors:
                typer.echo(line)
        if not report.ok:
            raise typer.Exit(ConfigError.exit_code)

    @app.command("list")
    @handle_errors
    def list_(as_json: bool = typer.Option(False, "--json", help="print the listing as JSON")) -> None:
        """List the bundled benchmarks and harness templates."""
        data = listing()
        if as_json:
            print_json(data)
            return
        for section in ("benchmarks", "templates"):
            typer.echo(f"{section}:")
            rows = data[section] or [{"name": "(none)", "description": ""}]
            width = max(len(r["name"]) for r in rows)
            for row in rows:
                typer.echo(f"  {row['name']:<{width}}  {row['description']}".rstrip())

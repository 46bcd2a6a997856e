"""Set-up commands that spend nothing: `saddler validate DIR` and `saddler list`; `create_fleet`, the one way to create
a fleet root (`saddler fleet init`, `saddler init --from-fleet`)."""

from __future__ import annotations

from pathlib import Path

import typer

from saddler import resources
from saddler.cli.common import handle_errors, print_json
from saddler.errors import ConfigError


def listing() -> dict[str, list[dict[str, str]]]:
    """Bundled benchmarks and templates, sorted by name (the `saddler list --json` document)."""
    return {
        "benchmarks": [{"name": n, "description": d} for n, d in resources.benchmarks().items()],
        "templates": [
            {"name": n, "description": resources.template_description(p), "path": str(p)}
            for n, p in resources.templates().items()
        ],
    }


def create_fleet(run_dir: Path, from_fleet: Path | None, *, bench_target: str | None, json_out: bool) -> None:
    """The one way to create a fleet root, for `saddler fleet init` and `saddler init --from-fleet`: init it, then
    print what was set up and found (JSON, or lines with program.md's warnings on stderr)."""
    from saddler.modes.fleet.setup import init_fleet, init_summary, render_init_summary

    info = init_summary(init_fleet(run_dir, from_fleet, bench_target=bench_target))
    if json_out:
        print_json(info)
        return
    for warning in info["warnings"]:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(render_init_summary(info))


def register(app: typer.Typer) -> None:
    """Add `validate` and `list` to `app`."""

    @app.command("validate")
    @handle_errors
    def validate(
        folder: Path = typer.Argument(..., help="a run folder (its saddler.toml [run]) or a harness folder"),
        as_json: bool = typer.Option(False, "--json", help="print {ok, checked, errors} as JSON"),
    ) -> None:
        """Check the config, the benchmark and the harness without spending anything; exit 2 and list every
        error (by file and dotted path) if anything would fail."""
        from saddler.run.folder_check import check_folder

        report = check_folder(folder)
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

"""`saddler doctor [DIR] [--json]`: check the configured backends' prerequisites; spends nothing."""

from __future__ import annotations

from pathlib import Path

import typer

from saddler.cli.common import handle_errors, print_json


def register(app: typer.Typer) -> None:
    """Add `doctor` to `app`."""

    @app.command()
    @handle_errors
    def doctor(
        run_dir: Path = typer.Argument(None, help="a run folder (default: the current folder if it has [run])"),
        json_out: bool = typer.Option(False, "--json", help="print the checks as JSON"),
    ) -> None:
        """Check python, git, the backend's CLI, key and SDK (and that it starts in the sessions' sandbox), and the
        executor's sandbox; exit 1 if one is missing."""
        from saddler.config import RunConfig, load_run_config, parse_saddler_file, read_toml
        from saddler.doctor import healthy, run_checks

        config: RunConfig | None = None
        if run_dir is not None:
            config = load_run_config(run_dir)
        elif (Path.cwd() / "saddler.toml").is_file():
            config = parse_saddler_file(read_toml(Path.cwd() / "saddler.toml")).run
        checks = run_checks(config, run_dir=run_dir)
        ok = healthy(checks)
        if json_out:
            print_json(
                {
                    "ok": ok,
                    "backend": config.sessions.backend if config else None,
                    "checks": [c.to_dict() for c in checks],
                }
            )
        else:
            for c in checks:
                mark = "ok " if c.ok else ("MISSING" if c.required else "-- ")
                typer.echo(f"{mark:8} {c.name:22} {c.detail}")
            typer.echo("all required prerequisites found" if ok else "some required prerequisites are missing")
        if not ok:
            raise typer.Exit(1)

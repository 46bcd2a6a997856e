"""`saddler` command line. Each command group lives in its own `cli_*` module and registers here."""

from __future__ import annotations

import typer

from saddler import cli_doctor, cli_harness, cli_modes, cli_run

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Optimize an agent harness against a benchmark.")

for module in (cli_harness, cli_run, cli_doctor, cli_modes):
    module.register(app)

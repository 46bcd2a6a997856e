"""`saddler` command line. Each command group lives in its own module of `saddler.cli` (`setup`, `run`, `doctor`,
`modes`) and registers here."""

from __future__ import annotations

import typer

from saddler.cli import doctor as cli_doctor
from saddler.cli import modes as cli_modes
from saddler.cli import run as cli_run
from saddler.cli import setup as cli_harness
from saddler.cli import ui as cli_ui

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain help text: `[run]` stays `[run]`, flags show no metavar (as `evo-dag`)
    help="Optimize an agent harness against a benchmark.",
)

for module in (cli_harness, cli_run, cli_doctor, cli_modes, cli_ui):
    module.register(app)

"""`python -m saddler`: the saddler CLI."""

from saddler.cli.app import app

app()

"""`python -m saddler`: the saddler CLI."""

from saddler.cli import app

app()

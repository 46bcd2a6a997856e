"""Helpers every `cli_*` module shares: clean error exits and JSON output.

`@handle_errors` turns a `SaddlerError` or `EvoDAGError` raised by a command into one message on stderr and the
exception's `exit_code`, and so an environment fault (disk full, permission denied, read-only file system, an
SQLite error: see `saddler.errors.as_user_error`) and Ctrl-C (`interrupted`, exit 130); anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from typing import Any, NoReturn, ParamSpec, TypeVar

import typer

from evodag.errors import EvoDAGError
from saddler.errors import SaddlerError, as_user_error

INTERRUPTED = 130  # the shell's exit status for a command ended by Ctrl-C (128 + SIGINT)
P = ParamSpec("P")
R = TypeVar("R")


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Decorate a typer command: a known error -> `error: <message>` on stderr, exit `exc.exit_code`."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (SaddlerError, EvoDAGError) as exc:  # an unknown node or a missing DB is the user's to fix
            fail(str(exc), exc.exit_code)
        except (OSError, sqlite3.Error) as exc:
            known = as_user_error(exc)
            if known is None:
                raise
            fail(str(known), known.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", INTERRUPTED)

    return wrapper


def fail(message: str, exit_code: int = 1) -> NoReturn:
    """Print `error: <message>` to stderr (only `<message>` for an interruption) and exit with `exit_code`."""
    typer.echo(message if exit_code == INTERRUPTED else f"error: {message}", err=True)
    raise typer.Exit(exit_code)


def to_json(obj: Any) -> str:
    """Stable JSON text: sorted keys, 2-space indent, paths and other objects as strings."""
    return json.dumps(obj, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def print_json(obj: Any) -> None:
    """Print `obj` as stable JSON (see `to_json`) on stdout."""
    typer.echo(to_json(obj))

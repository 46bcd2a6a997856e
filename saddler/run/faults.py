"""Fault injection for crash-safety tests: `SADDLER_FAULT=<point>:<n>[:<action>]` acts when this process passes
`point` for the n-th time (counted from process start). Unset in normal use: one dict lookup.

Points: `rollout` (a rollout result received, not yet stored), `session` (a diagnosis session recorded, its
edits not yet committed), `evolve` (an evolution session recorded, its action not yet carried out), `commit`
(a candidate committed, its node not yet stored), `write` (inside the transaction that stores a node and its
edge), `reflect` (lessons being written), `finish` (the end of the run, before the export and the report are
written).

Actions: `kill` (default: SIGKILL this process, at the n-th pass and every later one), `int` (SIGINT, as Ctrl-C
would, likewise), `enospc` (raise `OSError(ENOSPC)` once, as a file write on a full disk does), `sqlite_full`
(raise SQLite's `database or disk is full` once, as a store write on a full disk does).
"""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
from collections import Counter

_passes: Counter[str] = Counter()
POINTS = ("rollout", "session", "evolve", "commit", "write", "reflect", "finish")
ACTIONS = ("kill", "int", "enospc", "sqlite_full")


def fault_point(point: str, path: str = "") -> None:
    """Pass fault point `point`; `path` is the file a write here would go to (named by an `enospc` fault)."""
    spec = os.environ.get("SADDLER_FAULT")
    if not spec:
        return
    name, _, rest = spec.partition(":")
    if name != point:
        return
    count, _, action = rest.partition(":")
    action = action.lower() or "kill"
    _passes[point] += 1
    if _passes[point] < int(count or 1):
        return
    if action in ("kill", "int"):
        os.kill(os.getpid(), signal.SIGINT if action == "int" else signal.SIGKILL)
        return
    if _passes[point] != int(count or 1):
        return
    if action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path or None)
    if action == "sqlite_full":
        exc = sqlite3.OperationalError("database or disk is full")
        exc.sqlite_errorcode = sqlite3.SQLITE_FULL
        raise exc

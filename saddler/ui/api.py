"""The dashboard's JSON API: URL paths onto the views of `evodag.dashboard` (the same documents `evo-dag` prints).

    /api/runs                      the runs served, in the order given: [{"index", "label", "path", ...}]
    /api/<i>/head                  the cheap poll: newest event id and status (a live page polls it every ~2 s), and
                                   while it runs what is in flight (iterations, sandboxes busy, the search's ETA)
    /api/<i>/summary | graph | history | progress | tasks
    /api/<i>/node/<id>             a node's page (diffs, per-task outcomes, lessons, sessions)
    /api/<i>/task/<task id>        a task's page (outcome on every node, root causes, attempted fixes)

Each request opens the run's store read-only (a reader never blocks the loop) and closes it. `answer` returns
(HTTP status, JSON-ready document); an unknown run, node or task is a 404 with `{"error": message}`. Without an
`opener` each call opens the run's store read-only and closes it; the server passes one that keeps each store open
(`saddler.ui.server.SharedStores`: opening checks the whole file, ~0.1 s on a 300-iteration run).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from evodag import dashboard
from evodag.errors import EvoDAGError
from evodag.store import EvoDAG
from saddler.control import read_schedule

DB_FILE = "evodag.sqlite"
Opener = Callable[[int], AbstractContextManager[EvoDAG]]
"""`opener(i)`: a context holding run `i`'s store, open read-only."""


@dataclass(frozen=True)
class RunSource:
    """One run the dashboard shows: its folder (or the EvoDAG file itself) and a label."""

    path: Path

    @property
    def db(self) -> Path:
        return self.path if self.path.is_file() else self.path / DB_FILE

    @property
    def label(self) -> str:
        return (self.path.parent if self.path.is_file() else self.path).name or str(self.path)


def _head(store: EvoDAG) -> dict[str, Any]:
    """The cheap poll, with what the running loop has in flight (`saddler.control.read_schedule`) while it runs."""
    head = dashboard.head(store)
    head["schedule"] = read_schedule(store.path.parent) if head["status"] == "running" else None
    return head


def _history(store: EvoDAG) -> dict[str, Any]:
    from evodag.history import history

    return history(store)


VIEWS: dict[str, Callable[[EvoDAG], dict[str, Any]]] = {
    "head": _head,
    "summary": dashboard.summary,
    "graph": dashboard.graph,
    "history": _history,
    "progress": dashboard.progress,
    "tasks": dashboard.task_index,
}
PAGES: dict[str, Callable[[EvoDAG, str], dict[str, Any]]] = {
    "node": lambda s, arg: dashboard.node_page(s, _node_id(s, arg)),
    "task": lambda s, arg: dashboard.task_page(s, arg),
}


def _node_id(store: EvoDAG, arg: str) -> int:
    from evodag.errors import UnknownNodeError

    if not arg.isdigit():
        raise UnknownNodeError(arg)
    node_id = int(arg)
    dashboard.require_node_of_run(store, node_id)
    return node_id


def fresh_opener(sources: list[RunSource]) -> Opener:
    """Open run `i`'s store read-only for one answer, and close it after."""
    return lambda i: EvoDAG(sources[i].db, readonly=True)


def run_list(sources: list[RunSource], opener: Opener | None = None) -> list[dict[str, Any]]:
    """The runs served: index, label, folder and (when readable) run id, name and status."""
    opener = opener or fresh_opener(sources)
    out = []
    for i, src in enumerate(sources):
        entry: dict[str, Any] = {"index": i, "label": src.label, "path": str(src.path)}
        try:
            with opener(i) as store:
                run = store.get_run()
                entry.update(run_id=run.id, name=run.config.get("name", src.label), status=run.status)
        except (EvoDAGError, sqlite3.Error) as exc:
            entry["error"] = str(exc)
        out.append(entry)
    return out


def answer(sources: list[RunSource], path: str, opener: Opener | None = None) -> tuple[int, Any]:
    """(status, document) for an API path (see the module docstring)."""
    opener = opener or fresh_opener(sources)
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if parts[:1] != ["api"]:
        return 404, {"error": f"no such API path {path}"}
    if parts[1:] == ["runs"]:
        return 200, run_list(sources, opener)
    if len(parts) < 3 or not parts[1].isdigit() or int(parts[1]) >= len(sources):
        return 404, {"error": f"no such run in {path}; /api/runs lists them"}
    view, rest = parts[2], parts[3:]
    build: Callable[[EvoDAG], dict[str, Any]]
    if view in VIEWS and not rest:
        build = VIEWS[view]
    elif view in PAGES and len(rest) == 1:
        page, arg = PAGES[view], rest[0]
        build = lambda store: page(store, arg)  # noqa: E731
    else:
        return 404, {"error": f"no such view {path}"}
    try:
        with opener(int(parts[1])) as store:
            return 200, build(store)
    except EvoDAGError as exc:
        return 404, {"error": str(exc)}
    except sqlite3.Error as exc:  # the file went away or is being replaced: the page retries on its next poll
        return 503, {"error": f"cannot read {sources[int(parts[1])].db}: {exc}"}

"""Exceptions raised by the EvoDAG store and the `evo-dag` CLI. Messages say what to do next."""

from __future__ import annotations


class EvoDAGError(Exception):
    """Base class: a store fault or a bad request (unknown id, invalid value)."""

    exit_code = 2


class MissingDatabaseError(EvoDAGError):
    """No EvoDAG database where one was expected."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"no EvoDAG database at {path}; pass --db PATH, set EVODAG_DB, "
            "or run inside a run folder (one holding evodag.sqlite), e.g. --run DIR"
        )


class UnknownRunError(EvoDAGError):
    """No run with that id (or no run at all)."""

    def __init__(self, run_id: int | None) -> None:
        self.run_id = run_id
        what = "this database has no run yet" if run_id is None else f"unknown run {run_id}"
        super().__init__(f"{what}; `evo-dag summary` shows the latest run")


class UnknownNodeError(EvoDAGError):
    """No node with that id (or commit)."""

    def __init__(self, node: int | str) -> None:
        self.node = node
        super().__init__(f"unknown node {node}; `evo-dag summary` lists nodes (`evo-dag export --format json` all)")


class UnknownEdgeError(EvoDAGError):
    """No edge with that id or between those nodes."""

    def __init__(self, edge: int | str) -> None:
        self.edge = edge
        super().__init__(f"unknown edge {edge}; `evo-dag lineage CHILD` shows the edges leading to a node")


class UnknownTaskError(EvoDAGError):
    """No rollout or lesson mentions that task."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(
            f"unknown task {task_id!r}: no rollout or lesson mentions it; `evo-dag batch` shows the current tasks"
        )


class InvalidValueError(EvoDAGError):
    """A field name or value the store does not accept (a programming error in the caller)."""


class SchemaVersionError(EvoDAGError):
    """The database was written by a newer or older evodag than this one can read."""


class DamagedDatabaseError(EvoDAGError):
    """The file is not a usable EvoDAG: empty, not SQLite, failing its integrity check, or holding a value of
    the wrong type. Raised on open, before anything is written."""

    exit_code = 1


class CorruptRowError(DamagedDatabaseError):
    """One stored value cannot be read back as its column's type; names the table, row and column."""

    def __init__(self, table: str, row_id: object, column: str, problem: str, path: str = "") -> None:
        self.table, self.row_id, self.column, self.problem = table, row_id, column, problem
        where = f"{path}: " if path else ""
        super().__init__(
            f"{where}damaged EvoDAG value in {table} row {row_id}, column {column}: {problem}; "
            "restore the file from a backup or repair that value with sqlite3"
        )


class StoreFullError(EvoDAGError):
    """A write failed because the disk (or quota) is full; nothing of the failed write was kept."""

    exit_code = 1

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"disk full: the EvoDAG {path} could not be written (no space left on device); "
            "free space and run again (the run resumes where it stopped)"
        )

"""Mapping between the records of `evodag.models` and table rows: column lists, JSON and boolean columns."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, TypeVar

from evodag.errors import InvalidValueError
from evodag.models import Edge, Event, Iteration, Lesson, Node, RolloutRow, Run, SessionRow

T = TypeVar("T")

TABLE_OF: dict[type, str] = {
    Run: "runs",
    Node: "nodes",
    Edge: "edges",
    RolloutRow: "rollouts",
    Lesson: "lessons",
    SessionRow: "sessions",
    Iteration: "iterations",
    Event: "events",
}
JSON_COLUMNS: dict[str, frozenset[str]] = {
    "runs": frozenset({"config", "inputs"}),
    "nodes": frozenset({"hypothesis"}),
    "edges": frozenset({"files_changed", "fixed", "regressed", "still_failing", "still_passing"}),
    "iterations": frozenset({"batch"}),
    "events": frozenset({"payload"}),
    "sessions": frozenset({"result"}),
}
BOOL_COLUMNS: dict[str, frozenset[str]] = {
    "rollouts": frozenset({"passed"}),
    "iterations": frozenset({"exploration"}),
}


def columns(cls: type) -> tuple[str, ...]:
    """The record's field names, in declaration order (= the table's column names)."""
    return tuple(f.name for f in fields(cls))


def select_list(cls: type, alias: str = "") -> str:
    """A quoted SELECT column list in field order, e.g. `"id", "run_id", ...`."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f'{prefix}"{c}"' for c in columns(cls))


def dumps(value: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces) for a JSON column."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def encode(table: str, values: dict[str, Any]) -> dict[str, Any]:
    """Python values -> column values (JSON text, 0/1)."""
    js, bs = JSON_COLUMNS.get(table, frozenset()), BOOL_COLUMNS.get(table, frozenset())
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in js:
            out[key] = None if value is None else dumps(value)
        elif key in bs:
            out[key] = 1 if value else 0
        else:
            out[key] = value
    return out


def decoder(cls: type[T]) -> Any:
    """A function turning a row tuple (selected with `select_list(cls)`) into a `cls` record."""
    table = TABLE_OF[cls]
    names = columns(cls)
    js, bs = JSON_COLUMNS.get(table, frozenset()), BOOL_COLUMNS.get(table, frozenset())
    json_pos = [i for i, n in enumerate(names) if n in js]
    bool_pos = [i for i, n in enumerate(names) if n in bs]
    if not json_pos and not bool_pos:
        return lambda row: cls(*row)

    def decode(row: tuple[Any, ...]) -> T:
        values = list(row)
        for i in json_pos:
            if values[i] is not None:
                values[i] = json.loads(values[i])
        for i in bool_pos:
            values[i] = bool(values[i])
        return cls(*values)

    return decode


def check_fields(cls: type, given: dict[str, Any], *, forbidden: tuple[str, ...] = ("id",)) -> None:
    """Raise `InvalidValueError` for a field the record does not have (or may not be set)."""
    known = set(columns(cls)) - set(forbidden)
    unknown = sorted(set(given) - known)
    if unknown:
        raise InvalidValueError(
            f"{cls.__name__} has no settable field(s) {', '.join(unknown)}; settable: {', '.join(sorted(known))}"
        )


def check_choice(what: str, value: Any, allowed: tuple[str, ...]) -> None:
    """Raise `InvalidValueError` unless `value` is one of `allowed`."""
    if value not in allowed:
        raise InvalidValueError(f"invalid {what} {value!r}; expected one of: {', '.join(allowed)}")


def as_dict(record: Any) -> dict[str, Any]:
    """A record's fields as a new dict (shallow: list/dict values are shared; `dataclasses.asdict` deep-copies
    and costs ~10x on the query paths)."""
    return dict(vars(record))

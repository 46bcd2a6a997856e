"""Mapping between the records of `evodag.models` and table rows: column lists, JSON and boolean columns."""

from __future__ import annotations

import functools
import json
import operator
import types
import typing
from collections.abc import Callable, Container
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from evodag.errors import CorruptRowError, InvalidValueError
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
RECORD_OF: dict[str, type] = {table: cls for cls, table in TABLE_OF.items()}
JSON_COLUMNS: dict[str, frozenset[str]] = {
    "runs": frozenset({"config", "inputs"}),
    "nodes": frozenset({"hypothesis"}),
    "edges": frozenset({"files_changed", "fixed", "regressed", "still_failing", "still_passing"}),
    "iterations": frozenset({"batch", "evidence"}),
    "events": frozenset({"payload"}),
    "sessions": frozenset({"result"}),
}
BOOL_COLUMNS: dict[str, frozenset[str]] = {
    "rollouts": frozenset({"passed"}),
    "iterations": frozenset({"exploration"}),
}


def columns(cls: type) -> tuple[str, ...]:
    """The record's field names, in declaration order (= the table's column names)."""
    return _columns(cls)


def select_list(cls: type, alias: str = "") -> str:
    """A quoted SELECT column list in field order, e.g. `"id", "run_id", ...` (built once per record and alias:
    every query asks for it)."""
    return _select_list(cls, alias)


@functools.cache
def _columns(cls: Any) -> Any:
    return tuple(f.name for f in fields(cls))


@functools.cache
def _select_list(cls: Any, alias: str) -> Any:
    prefix = f"{alias}." if alias else ""
    return ", ".join(f'{prefix}"{c}"' for c in columns(cls))


def dumps(value: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces) for a JSON column."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def encode(table: str, values: dict[str, Any]) -> dict[str, Any]:
    """Python values -> column values (JSON text, 0/1); a value of the wrong type is an `InvalidValueError`."""
    check_types(table, values)
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


@dataclass(frozen=True)
class _Column:
    """What one column of a record holds: `kind` is int | float | str | bool | dict | list | any."""

    name: str
    kind: str
    nullable: bool


@functools.cache
def _schema(cls: Any) -> tuple[_Column, ...]:
    """The record's columns with the type its annotation promises (read once per class)."""
    hints = typing.get_type_hints(cls)
    table = TABLE_OF[cls]
    out = []
    for name in columns(cls):
        hint = hints[name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        nullable = type(None) in args
        base = next(a for a in args if a is not type(None))
        base = typing.get_origin(base) or base
        if name in JSON_COLUMNS.get(table, ()):
            kind = base.__name__ if base in (dict, list) else "any"
        elif name in BOOL_COLUMNS.get(table, ()):
            kind = "bool"
        else:
            kind = {int: "int", float: "float", str: "str", bool: "bool"}.get(base, "any")
        out.append(_Column(name, kind, nullable))
    return tuple(out)


def column_kinds(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """(column, kind, nullable) of a record's table: kind is int | float | str | bool | dict | list | any."""
    return tuple((c.name, c.kind, c.nullable) for c in _schema(cls))


# stored (SQLite) types each kind accepts: JSON and booleans are stored as text and 0/1
_STORED: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "str": (str,), "bool": (int,), "dict": (str,), "list": (str,), "any": (),
}  # fmt: skip
_NAMES = {"int": "an integer", "float": "a number", "str": "text", "bool": "0 or 1", "dict": "JSON text",
          "list": "JSON text"}  # fmt: skip
_FOUND = {int: "an integer", float: "a real number", str: "text", bytes: "a blob", type(None): "NULL"}


class _Anything:
    """Accepts every stored type (a column whose record field is typed `Any`)."""

    def __contains__(self, _item: object) -> bool:
        return True


def decoder(cls: type[T]) -> Callable[[tuple[Any, ...]], T]:
    """A function turning a row tuple (selected with `select_list(cls)`) into a `cls` record.

    Every value is checked against its column's type (JSON parsed, booleans from 0/1); a value that does not
    fit raises `CorruptRowError` naming the table, the row id and the column."""
    return _decoder(cls)  # type: ignore[arg-type]


@functools.cache
def _decoder(cls: Any) -> Any:
    table = TABLE_OF[cls]
    schema = _schema(cls)
    accepted: tuple[Container[type], ...] = tuple(
        frozenset((*_STORED[c.kind], *((type(None),) if c.nullable else ()))) if c.kind != "any" else _Anything()
        for c in schema
    )
    bools = [(i, c.name) for i, c in enumerate(schema) if c.kind == "bool"]
    jsons = [
        (i, c.name, dict if c.kind == "dict" else list) for i, c in enumerate(schema) if c.kind in ("dict", "list")
    ]
    contains = operator.contains
    good: set[tuple[type, ...]] = set()  # type signatures already checked (few: one per pattern of NULLs)

    def decode(row: tuple[Any, ...]) -> Any:
        signature = tuple(map(type, row))
        if signature not in good:
            if not all(map(contains, accepted, signature)):
                _raise_bad(table, schema, row)
            if len(good) < 1024:
                good.add(signature)
        if not bools and not jsons:
            return cls(*row)
        values = list(row)
        for i, name in bools:
            value = values[i]
            if value is not None:
                if value not in (0, 1):
                    raise CorruptRowError(table, row[0], name, f"expected 0 or 1, found {value!r}")
                values[i] = value == 1
        for i, name, kind in jsons:
            value = values[i]
            if value is None:
                continue
            try:
                parsed = json.loads(value)
            except ValueError as exc:
                raise CorruptRowError(table, row[0], name, f"invalid JSON ({exc})") from None
            if type(parsed) is not kind:
                what = "a JSON object" if kind is dict else "a JSON array"
                raise CorruptRowError(table, row[0], name, f"expected {what}, found {type(parsed).__name__}")
            values[i] = parsed
        return cls(*values)

    return decode


def _raise_bad(table: str, schema: tuple[_Column, ...], row: tuple[Any, ...]) -> None:
    for col, value in zip(schema, row, strict=True):
        if col.kind == "any" or (value is None and col.nullable):
            continue
        if type(value) not in _STORED[col.kind]:
            found = _FOUND.get(type(value), type(value).__name__)
            problem = f"expected {_NAMES[col.kind]}, found {found}" + (f" {value!r}" if type(value) is str else "")
            raise CorruptRowError(table, row[0], col.name, problem[:200])


def check_types(table: str, values: dict[str, Any]) -> None:
    """Raise `InvalidValueError` for a value whose Python type does not fit its column (a str score, ...)."""
    cls = RECORD_OF.get(table)
    if cls is None:
        return
    schema = {c.name: c for c in _schema(cls)}
    for key, value in values.items():
        col = schema.get(key)
        if col is None or col.kind in ("any", "bool", "dict", "list") or (value is None and col.nullable):
            continue
        if isinstance(value, bool) and col.kind != "int":
            ok = False
        elif col.kind == "float":
            ok = isinstance(value, (int, float))
        elif col.kind == "int":
            ok = isinstance(value, int)
        else:
            ok = isinstance(value, str)
        if not ok:
            raise InvalidValueError(f"{table}.{key}: expected {_NAMES[col.kind]}, got {type(value).__name__}")


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


def cache_payload(cache_key: str, text: Any) -> dict[str, Any]:
    """A `rollout_cache` payload parsed; `CorruptRowError` (row = its key) when it is not a JSON object."""
    try:
        parsed = json.loads(text) if isinstance(text, str) else None
    except ValueError as exc:
        raise CorruptRowError("rollout_cache", repr(cache_key), "payload", f"invalid JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise CorruptRowError("rollout_cache", repr(cache_key), "payload", "expected a JSON object")
    return parsed

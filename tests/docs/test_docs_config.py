"""The docs' config: every key the TOML blocks, `--set`s and prose of README and the site's pages name is a field of
the pydantic models (with a valid value), and every field is documented in the configuration reference
(docs/configuration.md), or listed below as undocumented on purpose with the reason."""

from __future__ import annotations

import inspect
import re
import tomllib
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import BaseModel, ValidationError

from saddler.benchmark import benchmark_target
from saddler.config import HarnessConfig, RunConfig, SaddlerFile

if TYPE_CHECKING:
    from plugins.docs import Doc

UNDOCUMENTED: dict[str, str] = {
    "run.harness": "written by `saddler init` (the run's clone is always RUN/harness, and init refuses to set it); "
    "fork and crash recovery read it: not a user setting",
}
"""Config fields the configuration reference does not document, each with the reason."""

_IDENT = re.compile(r"\b[a-z][a-z0-9_]*\b")
_TABLE = re.compile(r"^\s*\[([a-z0-9_.\"-]+)\]\s*(?:#.*)?$")
_SECTIONS = ("loop", "policies", "executor", "sessions", "benchmark_options")
_CONFIG_SPAN = re.compile(rf"^(?:run\.)?((?:{'|'.join(_SECTIONS)})(?:\.[a-z0-9_]+)+)(?:\s*=\s*(.+))?$")
_HARNESS_SPAN = re.compile(r"^(harness\.(?:components|structure)(?:\.[a-z0-9_]+)+)(?:\s*=\s*(.+))?$")


def _submodel(annotation: Any) -> type[BaseModel] | None:
    for t in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def leaf_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted paths of every field that holds a value (not a table), e.g. `loop.batch_size`."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        sub = _submodel(info.annotation)
        path = f"{prefix}{name}"
        out += leaf_fields(sub, f"{path}.") if sub else [path]
    return out


def all_fields() -> list[str]:
    """Every field as its TOML path: `run.loop.batch_size`, `harness.components.steering`."""
    return leaf_fields(RunConfig, "run.") + leaf_fields(HarnessConfig, "harness.")


def _flatten(table: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in table.items():
        path = f"{prefix}{key}"
        out += _flatten(value, f"{path}.") if isinstance(value, dict) and value else [path]
    return out


def config_docs(block_text: str) -> dict[str, Any]:
    """A docs TOML block as a config document (`[run]`/`[harness]`), or {} when it is something else."""
    doc = tomllib.loads(block_text)
    return doc if {"run", "harness"} & set(doc) else {}


def keys_in_toml(doc: Doc) -> set[str]:
    """Dotted keys set in the doc's config TOML blocks."""
    return {path for block in doc.toml_blocks() for path in _flatten(config_docs(block.text))}


def names_in_toml_comments(doc: Doc) -> set[str]:
    """`table.name` for every identifier a comment names inside a config table of a TOML block (`# max_turns,
    max_budget_usd, …: set here they apply to every role` under [run.sessions] documents run.sessions.max_turns)."""
    found: set[str] = set()
    for block in doc.toml_blocks():
        if not config_docs(block.text):
            continue
        table = ""
        for line in block.text.splitlines():
            header = _TABLE.match(line)
            if header:
                table = header.group(1)
            elif "#" in line and table:
                found |= {f"{table}.{name}" for name in _IDENT.findall(line.split("#", 1)[1])}
    return found


def config_spans(doc: Doc) -> list[tuple[str, str | None]]:
    """(TOML path, value or None) for every inline span naming a config key: `policies.score` (as
    run.policies.score), `run.loop.batch_size`, `executor.kind = "ray"`, `harness.components.protected`."""
    out: list[tuple[str, str | None]] = []
    for span in doc.spans():
        match = _CONFIG_SPAN.match(span)
        if match:
            out.append((f"run.{match.group(1)}", match.group(2)))
        match = _HARNESS_SPAN.match(span)
        if match:
            out.append((match.group(1), match.group(2)))
    return out


def role_tables(doc: Doc) -> set[str]:
    """Roles the doc names as `[run.sessions.roles.<role>]` tables, `a|b|c` alternatives expanded."""
    roles: set[str] = set()
    for span in doc.spans():
        match = re.fullmatch(r"\[run\.sessions\.roles\.([a-z_|<>]+)\]", span)
        if match:
            roles |= set(match.group(1).split("|"))
    return roles


def documented_fields(doc: Doc) -> set[str]:
    named = keys_in_toml(doc) | names_in_toml_comments(doc) | {path for path, _ in config_spans(doc)}
    fields = set(all_fields())
    documented = {f for f in fields if f in named or any(n.startswith(f"{f}.") for n in named)}
    # a role table takes the limits of [run.sessions]: documented once the doc names the tables and the limit
    roles = role_tables(doc)
    for f in fields:
        parts = f.split(".")
        if parts[:3] == ["run", "sessions", "roles"] and f"run.sessions.{parts[4]}" in documented:
            documented |= {f} if parts[3] in roles or "<role>" in roles else set()
    return documented


def test_every_config_block_of_the_docs_validates(reference: Doc) -> None:
    blocks = [b for b in reference.toml_blocks() if config_docs(b.text)]
    assert len(blocks) >= 6
    errors = {}
    for block in blocks:
        try:
            SaddlerFile.model_validate(config_docs(block.text))
        except ValidationError as exc:
            errors[block.line] = str(exc)
    assert errors == {}


def test_the_docs_benchmark_options_are_parameters_of_the_benchmark(reference: Doc) -> None:
    checked = []
    for block in reference.toml_blocks():
        run = config_docs(block.text).get("run", {})
        if "benchmark_options" not in run:
            continue
        module, _, attr = benchmark_target(run["benchmark"]).partition(":")
        cls = getattr(__import__(module, fromlist=[attr]), attr)
        params = set(inspect.signature(cls).parameters)
        checked.append(run["benchmark"])
        assert set(run["benchmark_options"]) - params == set(), run["benchmark"]
        named = set(_IDENT.findall(block.text))  # keys, and the optional ones the block's comments name
        assert params - named - set(_IDENT.findall(reference.prose)) == set(), f"{run['benchmark']}: not in the docs"
    assert sorted(checked) == ["command", "harbor", "inspect"]


def test_every_config_key_named_in_the_docs_prose_exists_with_a_valid_value(reference: Doc) -> None:
    spans = config_spans(reference)
    assert len(spans) > 10
    problems = {}
    for path, value in spans:
        head, *keys = path.split(".")
        model = HarnessConfig if head == "harness" else RunConfig
        try:
            doc: Any = tomllib.loads(f"x = {value}")["x"] if value else None
        except tomllib.TOMLDecodeError:
            doc = None
        nested: dict[str, Any] = {}
        cursor = nested
        for key in keys[:-1]:
            cursor = cursor.setdefault(key, {})
        cursor[keys[-1]] = doc
        try:
            model.model_validate(nested)
        except ValidationError as exc:
            for error in exc.errors():
                if error["type"] == "extra_forbidden" or doc is not None:
                    problems[path if value is None else f"{path} = {value}"] = error["msg"]
    assert problems == {}


def test_every_config_field_is_documented_in_the_configuration_reference(config_page: Doc) -> None:
    documented = documented_fields(config_page)
    missing = sorted(set(all_fields()) - documented - set(UNDOCUMENTED))
    assert missing == []


def test_the_undocumented_list_is_not_stale(config_page: Doc) -> None:
    fields = set(all_fields())
    assert {f for f in UNDOCUMENTED if f not in fields} == set()
    assert {f for f in UNDOCUMENTED if f in documented_fields(config_page)} == set()


@pytest.mark.parametrize("text", ["[run.loop]\nbatch_sise = 3\n", '[run.policies]\nranking = "best_batch"\n'])
def test_a_drifted_block_fails_validation(text: str) -> None:
    with pytest.raises(ValidationError):
        SaddlerFile.model_validate(config_docs(text))

"""Every `saddler …` / `evo-dag …` command the docs show exists with the options it shows, and every command of
the two CLIs is in README's Commands table (the approach of sqlite-utils' tests/test_docs.py)."""

from __future__ import annotations

from typing import Any

import pytest
from plugins.docs import MAIN_DOCS, TOOLS, CommandTree, Doc, tokens_of

from saddler.config import RunConfig

ELLIPSIS = {"…", "...", "|"}


def check_command(trees: dict[str, CommandTree], command: str) -> tuple[list[str], list[str], list[str]]:
    """Resolve `command` against the CLIs: (problems, leaf commands it names, `--set` keys it passes).

    `a / b / c` names siblings (`saddler pause / resume / stop DIR`); a part starting with an option continues the
    previous command (`saddler init DIR --template NAME` / `--harness PATH`)."""
    words = tokens_of(command)
    root = trees[words[0]]
    parts: list[list[str]] = [[]]
    for word in words[1:]:
        if word == "/":
            parts.append([])
        else:
            parts[-1].append(word)
    problems: list[str] = []
    named: list[str] = []
    set_keys: list[str] = []
    current: CommandTree | None = None
    group = root
    for part in parts:
        if not part:
            continue
        if part[0].startswith("-"):
            if current is None:
                problems.append(f"{command!r}: options {part} follow no command")
                continue
            rest = part
        else:
            start = group if group.sub(part[0]) else root
            node, i = start, 0
            while node.is_group and i < len(part) and node.sub(part[i]):
                node = node.sub(part[i])  # type: ignore[assignment]
                i += 1
            rest = part[i:]
            if node.is_group:
                if any(w not in ELLIPSIS for w in rest):
                    problems.append(f"{command!r}: {node.name!r} has no subcommand {rest[0]!r}")
                group, current = node, None
                continue
            current = node
            group = _parent(root, node)
            named.append(node.name)
        problems += _check_words(current, rest, command, set_keys)  # type: ignore[arg-type]
    return problems, named, set_keys


def _parent(root: CommandTree, node: CommandTree) -> CommandTree:
    parent = root
    for name in node.name.split()[1:-1]:
        parent = parent.sub(name)  # type: ignore[assignment]
    return parent


def _check_words(cmd: CommandTree, words: list[str], command: str, set_keys: list[str]) -> list[str]:
    options = cmd.options()
    problems: list[str] = []
    positional = 0
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-") and word not in ELLIPSIS:
            name, eq, value = word.partition("=")
            if name not in options:
                problems.append(f"{command!r}: {cmd.name} has no option {name!r} (it has {sorted(options)})")
            param = options.get(name)
            if param is not None and not param.is_flag and not eq:
                i += 1
                value = words[i] if i < len(words) else ""
            if name == "--set" and "=" in value and not value.split("=", 1)[0].isupper():
                set_keys.append(value.split("=", 1)[0])
        elif word not in ELLIPSIS:
            positional += 1
        i += 1
    if positional > cmd.max_arguments():
        problems.append(f"{command!r}: {cmd.name} takes {cmd.max_arguments()} arguments, the docs give {positional}")
    return problems


def config_path_error(path: str) -> str | None:
    """None when `path` (dotted, under [run]) names a config field; dict fields take any key below them."""
    model: Any = RunConfig
    parts = path.split(".")
    for i, part in enumerate(parts):
        fields = model.model_fields
        if part not in fields:
            return f"{'.'.join(parts[: i + 1])}: not a field of {model.__name__} (fields: {sorted(fields)})"
        annotation = fields[part].annotation
        sub = next((t for t in (annotation, *getattr(annotation, "__args__", ())) if _is_model(t)), None)
        if sub is None:
            return None if i == len(parts) - 1 or getattr(annotation, "__origin__", None) is dict else path
        model = sub
    return None


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and hasattr(t, "model_fields")


def _all_commands(docs: dict[str, Doc]) -> list[tuple[str, str]]:
    return [c for doc in docs.values() for c in doc.command_lines()]


def test_every_documented_command_exists_with_its_options(all_docs: dict[str, Doc], cli_trees) -> None:
    commands = _all_commands(all_docs)
    assert len(commands) > 40  # the parser still finds the docs' commands
    problems = [f"{where}: {p}" for where, command in commands for p in check_command(cli_trees, command)[0]]
    assert problems == []


def test_every_documented_set_key_is_a_config_field(all_docs: dict[str, Doc], cli_trees) -> None:
    keys = {key for _, command in _all_commands(all_docs) for key in check_command(cli_trees, command)[2]}
    assert {"policies.phases", "loop.max_iterations"} <= keys
    assert {k: config_path_error(k) for k in keys if config_path_error(k)} == {}


def _table_commands(readme: Doc) -> list[str]:
    """The Commands table's first cells as command strings: a span that does not start with a tool continues
    the previous span's command (`saddler skill run SKILL_DIR` / `skill report W`)."""
    out: list[str] = []
    for row in readme.table_rows("command"):
        cell = row.split(" | ")[0]
        current = ""
        for span in tokens_of_cell(cell):
            if span.split(" ", 1)[0] in TOOLS:
                if current:
                    out.append(current)
                current = span
            else:
                current += f" / {span}"
        out.append(current)
    return out


def tokens_of_cell(cell: str) -> list[str]:
    import re

    return re.findall(r"`([^`]+)`", cell)


def test_every_cli_command_is_in_the_readme_commands_table(readme: Doc, cli_trees) -> None:
    documented: set[str] = set()
    for command in _table_commands(readme):
        problems, named, _ = check_command(cli_trees, command)
        assert problems == [], command
        documented |= set(named)
    everything = {leaf for tree in cli_trees.values() for leaf in tree.leaves()}
    assert sorted(everything - documented) == []


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("saddler run DIR --verbose", "has no option '--verbose'"),
        ("saddler frobnicate DIR", "has no subcommand 'frobnicate'"),
        ("saddler status DIR EXTRA", "takes 1 arguments"),
        ("saddler fleet launch DIR", "has no subcommand 'launch'"),
        ("evo-dag edge A B C", "takes 2 arguments"),
        ("saddler pause / resume / halt DIR", "has no subcommand 'halt'"),
        ("saddler init DIR --template NAME / --harnes PATH", "has no option '--harnes'"),
    ],
)
def test_the_checker_finds_a_drifted_command(cli_trees, command: str, problem: str) -> None:
    problems = check_command(cli_trees, command)[0]
    assert len(problems) == 1 and problem in problems[0], problems


def test_the_checker_reads_siblings_and_continuations(cli_trees) -> None:
    assert check_command(cli_trees, "saddler fleet init DIR / fleet run DIR --detach / status / kill")[:2] == (
        [],
        ["saddler fleet init", "saddler fleet run", "saddler fleet status", "saddler fleet kill"],
    )
    assert check_command(cli_trees, "saddler init D --set loop.max_iterations=3 --set KEY=VALUE")[2] == [
        "loop.max_iterations"
    ]
    assert config_path_error("loop.max_iteration") is not None
    assert config_path_error("sessions.prompts.system") is None


def test_main_docs_are_the_three_named() -> None:
    assert MAIN_DOCS == ("README.md", "DEVELOPERS.md", "docs/architecture.md")

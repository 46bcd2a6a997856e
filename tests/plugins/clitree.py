"""Fixtures for the documentation tests: the `saddler` and `evo-dag` Typer apps as command trees, and checkers that
resolve a documented command or config key against them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import typer.main

from plugins.docs import tokens_of
from saddler.config import RunConfig

CommandCheck = tuple[list[str], list[str], list[str]]


@dataclass(frozen=True)
class CommandTree:
    """A click command (or group) of one of the Typer apps."""

    name: str
    command: Any

    @property
    def is_group(self) -> bool:
        return hasattr(self.command, "commands")

    def sub(self, name: str) -> CommandTree | None:
        if not self.is_group or name not in self.command.commands:
            return None
        return CommandTree(f"{self.name} {name}", self.command.commands[name])

    def leaves(self) -> list[str]:
        if not self.is_group:
            return [self.name]
        return [leaf for n in self.command.commands for leaf in self.sub(n).leaves()]  # type: ignore[union-attr]

    def options(self) -> dict[str, Any]:
        """Option name (every spelling, `--help` included) -> click parameter."""
        opts: dict[str, Any] = {"--help": None}
        for param in self.command.params:
            if param.param_type_name == "option":
                for name in (*param.opts, *param.secondary_opts):
                    opts[name] = param
        return opts

    def max_arguments(self) -> float:
        args = [p for p in self.command.params if p.param_type_name == "argument"]
        return float("inf") if any(p.nargs == -1 for p in args) else sum(p.nargs for p in args)


ELLIPSIS = {"…", "...", "|"}


def _check_command(trees: dict[str, CommandTree], command: str) -> tuple[list[str], list[str], list[str]]:
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


def _config_path_error(path: str) -> str | None:
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


@pytest.fixture(scope="session")
def cli_trees() -> dict[str, CommandTree]:
    """`saddler` and `evo-dag` as click command trees."""
    from evodag.cli import app as evodag_app
    from saddler.cli.app import app as saddler_app

    return {
        "saddler": CommandTree("saddler", typer.main.get_command(saddler_app)),
        "evo-dag": CommandTree("evo-dag", typer.main.get_command(evodag_app)),
    }


@pytest.fixture(scope="session")
def check_command(cli_trees: dict[str, CommandTree]) -> Callable[[str], CommandCheck]:
    """`check_command(command)`: resolve a documented command against the CLIs; returns (problems, the leaf
    commands it names, the `--set` keys it passes). `a / b / c` names siblings (`saddler pause / resume / stop
    DIR`); a part starting with an option continues the previous command (`saddler init DIR --template NAME` /
    `--harness PATH`)."""
    return lambda command: _check_command(cli_trees, command)


@pytest.fixture(scope="session")
def config_path_error() -> Callable[[str], str | None]:
    """`config_path_error(path)`: None when `path` (dotted, under [run]) names a config field, else why not; a
    dict field (`benchmark_options`, `sessions.prompts`) takes any key below it."""
    return _config_path_error

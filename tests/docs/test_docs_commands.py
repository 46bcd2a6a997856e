"""Every `saddler …` / `evo-dag …` command the docs show exists with the options it shows, and every command of
the two CLIs is in README's Commands table (the approach of sqlite-utils' tests/test_docs.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from plugins.clitree import CommandCheck, CommandTree
    from plugins.docs import Doc


def _all_commands(docs: dict[str, Doc]) -> list[tuple[str, str]]:
    return [c for doc in docs.values() for c in doc.command_lines()]


def test_every_documented_command_exists_with_its_options(
    all_docs: dict[str, Doc], check_command: Callable[[str], CommandCheck]
) -> None:
    commands = _all_commands(all_docs)
    assert len(commands) > 40  # the parser still finds the docs' commands
    problems = [f"{where}: {p}" for where, command in commands for p in check_command(command)[0]]
    assert problems == []


def test_every_documented_set_key_is_a_config_field(
    all_docs: dict[str, Doc],
    check_command: Callable[[str], CommandCheck],
    config_path_error: Callable[[str], str | None],
) -> None:
    keys = {key for _, command in _all_commands(all_docs) for key in check_command(command)[2]}
    assert {"policies.phases", "loop.max_iterations"} <= keys
    assert {k: config_path_error(k) for k in keys if config_path_error(k)} == {}


def test_every_cli_command_is_in_the_readme_commands_table(
    readme: Doc, cli_trees: dict[str, CommandTree], check_command: Callable[[str], CommandCheck]
) -> None:
    documented: set[str] = set()
    for command in readme.command_table():
        problems, named, _ = check_command(command)
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
def test_the_checker_finds_a_drifted_command(
    check_command: Callable[[str], CommandCheck], command: str, problem: str
) -> None:
    problems = check_command(command)[0]
    assert len(problems) == 1 and problem in problems[0], problems


def test_the_checker_reads_siblings_continuations_and_set_keys(
    check_command: Callable[[str], CommandCheck], config_path_error: Callable[[str], str | None]
) -> None:
    assert check_command("saddler fleet init DIR / fleet run DIR --detach / status / kill")[:2] == (
        [],
        ["saddler fleet init", "saddler fleet run", "saddler fleet status", "saddler fleet kill"],
    )
    assert check_command("saddler init D --set loop.max_iterations=3 --set KEY=VALUE")[2] == ["loop.max_iterations"]
    assert config_path_error("loop.max_iteration") is not None
    assert config_path_error("sessions.prompts.system") is None


def test_every_command_takes_json_except_those_readme_names(
    readme: Doc, cli_trees: dict[str, CommandTree], check_command: Callable[[str], CommandCheck]
) -> None:
    sentence = readme.prose.split("Every command takes `--json` except", 1)[1].split("tell the story", 1)[0]
    without = {name for span in re.findall(r"`([^`\n]+)`", sentence) for name in check_command(span)[1]}
    assert without, "README no longer lists the commands without --json"

    def leaves(tree: CommandTree) -> list[CommandTree]:
        return [x for n in tree.command.commands for x in leaves(tree.sub(n))] if tree.is_group else [tree]

    lacking = {c.name for tree in cli_trees.values() for c in leaves(tree) if "--json" not in c.options()}
    assert sorted(lacking) == sorted(without)

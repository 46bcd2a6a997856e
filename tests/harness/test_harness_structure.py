"""Structure rules: SKILL.md frontmatter, H2 headings, ${VAR} references, compiling Python, required files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from saddler.harness.space import HarnessSpace
from saddler.harness.structure import check_skill_text, h2_headings, parse_frontmatter, var_refs

SKILL = "skills/demo/SKILL.md"


@pytest.fixture
def space(tmp_path: Path, source_repo: Callable[..., Path]) -> HarnessSpace:
    source = source_repo(tmp_path / "user-harness")
    return HarnessSpace.create(source, tmp_path / "run" / "harness", tmp_path / "run" / "worktrees")


@pytest.fixture
def skill_md(harness_files: dict[str, str]) -> str:
    """The demo harness's skills/demo/SKILL.md: frontmatter, two H2 sections, two ${VAR}s."""
    return harness_files["skills/demo/SKILL.md"]


@pytest.fixture
def problems_after(write_files: Callable[[Path, dict[str, str]], None]) -> Callable[..., list[str]]:
    """`problems_after(space, files, remove=())`: the structure problems of the baseline with `files` written
    over it and `remove` deleted, committed as a diagnosis commits its edit."""

    def validate(space: HarnessSpace, files: dict[str, str], remove: tuple[str, ...] = ()) -> list[str]:
        base = space.baseline_commit()
        wt = space.worktree(base, "candidate")
        write_files(wt, files)
        for rel in remove:
            (wt / rel).unlink()
        commit = space.commit_worktree(wt, "candidate") or base  # None: nothing changed
        return space.validate_commit(wt, base, commit)

    return validate


def test_unchanged_harness_is_valid(space: HarnessSpace, problems_after: Callable[..., list[str]]) -> None:
    assert problems_after(space, {}) == []


def test_valid_edit_keeps_structure(
    space: HarnessSpace, problems_after: Callable[..., list[str]], skill_md: str
) -> None:
    edited = skill_md.replace("Be brief.", "Be brief and cite ${INPUT}.") + "\n## New section\n\nMore.\n"
    assert problems_after(space, {SKILL: edited, "tools/search.py": "def search(q):\n    return []\n"}) == []


def test_broken_frontmatter(space: HarnessSpace, problems_after: Callable[..., list[str]], skill_md: str) -> None:
    no_close = skill_md.replace("description: Does the demo thing\n---\n", "description: Does the demo thing\n")
    assert problems_after(space, {SKILL: no_close}) == [f"{SKILL}: frontmatter: missing closing '---' line"]
    no_block = skill_md.split("---\n", 2)[2]
    assert problems_after(space, {SKILL: no_block}) == [
        f"{SKILL}: frontmatter: missing (the file must start with a '---' line)"
    ]
    not_kv = skill_md.replace("name: demo-skill", "name demo-skill")
    assert problems_after(space, {SKILL: not_kv}) == [
        f"{SKILL}: frontmatter: line 2 is not 'key: value': 'name demo-skill'"
    ]


def test_empty_required_fields(space: HarnessSpace, problems_after: Callable[..., list[str]], skill_md: str) -> None:
    text = skill_md.replace("name: demo-skill", "name: ''").replace("description: Does the demo thing", "title: x")
    assert problems_after(space, {SKILL: text}) == [
        f"{SKILL}: frontmatter: 'name' is missing or empty",
        f"{SKILL}: frontmatter: 'description' is missing or empty",
    ]


def test_dropped_h2_and_var(space: HarnessSpace, problems_after: Callable[..., list[str]], skill_md: str) -> None:
    text = skill_md.replace("## Rules\n", "### Rules\n").replace("${INPUT}", "the input")
    assert problems_after(space, {SKILL: text}) == [
        f"{SKILL}: H2 heading removed: ## Rules",
        f"{SKILL}: variable reference removed: ${{INPUT}}",
    ]


def test_syntax_error_in_changed_python_and_missing_required(
    space: HarnessSpace, problems_after: Callable[..., list[str]]
) -> None:
    problems = problems_after(space, {"tools/search.py": "def search(q:\n    return q\n"}, remove=("loop.py",))
    assert problems == [
        "tools/search.py:1: syntax error: '(' was never closed",
        "required file missing: loop.py",
    ]


def test_untracked_new_python_file_is_checked(space: HarnessSpace, problems_after: Callable[..., list[str]]) -> None:
    problems = problems_after(space, {"tools/new_tool.py": "x = = 1\n"})
    assert problems == ["tools/new_tool.py:1: syntax error: invalid syntax"]


def test_new_skill_file_without_parent_needs_only_frontmatter(
    space: HarnessSpace, problems_after: Callable[..., list[str]]
) -> None:
    fresh = "---\nname: other\ndescription: >\n  folded\n  text\n---\n\n## Only\n"
    assert problems_after(space, {"skills/other/SKILL.md": fresh}) == []
    broken = "---\nname: other\n---\n"
    assert problems_after(space, {"skills/other/SKILL.md": broken}) == [
        "skills/other/SKILL.md: frontmatter: 'description' is missing or empty"
    ]


def test_parse_frontmatter_dialect() -> None:
    text = '---\n# comment\nname: "quoted"\ndescription: |\n  line one\n  line two\ntags:\n- a\n- b\n---\nbody\n'
    fields, problems = parse_frontmatter(text)
    assert problems == []
    assert fields == {"name": "quoted", "description": "line one line two", "tags": "- a - b"}
    fields, problems = parse_frontmatter("---\nname: a\nname: b\n---\n")
    assert fields is None and problems == ["frontmatter: duplicate key 'name' (line 3)"]


def test_headings_ignore_code_fences_and_vars_are_exact() -> None:
    text = "## One\n```\n## Not a heading\n```\n### Three\n## Two ##\n${A} $B ${not-var} ${C_1}\n"
    assert h2_headings(text) == ["One", "Two"]
    assert var_refs(text) == {"${A}", "${C_1}"}
    assert check_skill_text("S.md", "---\nname: a\ndescription: b\n---\n## One\n", text) == [
        "S.md: H2 heading removed: ## Two",
        "S.md: variable reference removed: ${A}",
        "S.md: variable reference removed: ${C_1}",
    ]

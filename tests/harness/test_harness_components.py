"""Component-map globs: classify, patch_kind, protected_paths."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saddler.config import ComponentMap
from saddler.errors import ConfigError
from saddler.harness.components import classify, glob_regex, matches, patch_kind, protected_paths

CMAP = ComponentMap(
    capability=["tools/**", "agent/loop.py", "middleware/*.py"],
    steering=["prompts/**", "**/*.md", "hooks/"],
    protected=["evals/**", "data"],
)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("tools/**", "tools/a.py", True),
        ("tools/**", "tools/deep/er/a.py", True),
        ("tools/**", "toolsx/a.py", False),
        ("**/*.md", "README.md", True),
        ("**/*.md", "docs/a/b.md", True),
        ("**/*.md", "docs/a/b.mdx", False),
        ("a/**/b.txt", "a/b.txt", True),
        ("a/**/b.txt", "a/x/y/b.txt", True),
        ("a/**/b.txt", "xa/b.txt", False),
        ("middleware/*.py", "middleware/retry.py", True),
        ("middleware/*.py", "middleware/sub/retry.py", False),
        ("*.py", "loop.py", True),
        ("*.py", "pkg/loop.py", False),
        ("hooks/", "hooks/pre.sh", True),
        ("data", "data/train.jsonl", True),
        ("data", "database.py", False),
        ("./prompts/?.md", "prompts/a.md", True),
        ("prompts/[ab].md", "prompts/b.md", True),
        ("prompts/[!ab].md", "prompts/b.md", False),
        ("prompts/[!ab].md", "prompts/c.md", True),
        ("file+name(1).txt", "file+name(1).txt", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert bool(glob_regex(pattern).fullmatch(path)) is expected


SEGMENT = st.text(alphabet="abcXYZ09._-+() ", min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))


@given(st.lists(SEGMENT, min_size=1, max_size=4))
def test_literal_path_matches_itself_and_double_star_spans_directories(segments: list[str]) -> None:
    path = "/".join(segments)
    assert matches(path, [path])
    assert matches(path, ["**"])
    assert matches(path, [f"{segments[0]}/**"]) is (len(segments) > 1)
    assert matches(path, [f"**/{segments[-1]}"])
    assert not matches(path, [path + "x"])


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("tools/search.py", "capability"),
        ("tools/README.md", "capability"),  # capability wins over steering
        ("prompts/system.md", "steering"),
        ("docs/notes.md", "steering"),
        ("evals/grade.py", "protected"),
        ("evals/notes.md", "protected"),  # protected wins over everything
        ("saddler.toml", "protected"),  # always protected
        ("data/tasks.json", "protected"),
        ("hooks/on_stop.sh", "steering"),
        ("agent/loop.py", "capability"),
        ("agent/other.py", "unclassified"),
        ("./tools/x.py", "capability"),
    ],
)
def test_classify(path: str, kind: str) -> None:
    assert classify(path, CMAP) == kind


def test_patch_kind_and_protected_paths() -> None:
    assert patch_kind(["tools/a.py", "agent/loop.py"], CMAP) == "capability"
    assert patch_kind(["prompts/a.txt"], CMAP) == "steering"
    assert patch_kind(["tools/a.py", "prompts/a.txt"], CMAP) == "mixed"
    assert patch_kind(["tools/a.py", "agent/other.py"], CMAP) == "capability"
    assert patch_kind(["agent/other.py"], CMAP) == "unclassified"
    assert patch_kind([], CMAP) == "unclassified"
    paths = ["tools/a.py", "saddler.toml", "evals/x.py", "saddler.toml"]
    assert protected_paths(paths, CMAP) == ["saddler.toml", "evals/x.py"]


def test_malformed_glob_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"invalid glob 'x/\[z-a\].py': bad character range z-a"):
        glob_regex("x/[z-a].py")


def test_saddler_toml_is_protected_even_when_not_listed() -> None:
    cmap = ComponentMap(protected=["secret/**"])
    assert cmap.protected == ["secret/**", "saddler.toml"]
    assert classify("saddler.toml", cmap) == "protected"

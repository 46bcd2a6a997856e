"""The decision words have one home (`evodag.decisions`): the kept set, the seeds' word maps and the stall rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from repo_paths import REPO

from evodag.decisions import (
    KEPT_DECISIONS,
    KEPT_STATUSES,
    NODE_STATUSES,
    SKILL_VERDICT_STATUS,
    STATUS_TSV,
    TSV_STATUS,
    running_stalls,
    stall_after,
    trailing_stalls,
)

HOME = REPO / "evodag" / "decisions.py"
WORDS = {"accepted", "neutral", "rejected", "invalid", "baseline", "keep", "discard", "crash", "KEEP", "NEUTRAL"}


def _sources() -> list[Path]:
    return [p for d in ("saddler", "evodag", "bench", "benchmarks") for p in sorted((REPO / d).rglob("*.py"))]


def _strings(nodes: list[ast.expr | None]) -> list[str] | None:
    """The string constants of `nodes` when every one is a string constant, else None."""
    out = [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return out if len(out) == len(nodes) else None


def _copies(path: Path) -> list[str]:
    """Literal kept sets (a collection naming accepted and neutral) and literal maps between decision vocabularies."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            words = _strings(list(node.elts)) or []
            if {"accepted", "neutral"} <= set(words):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {words}")
        elif isinstance(node, ast.Dict):
            keys, values = _strings(list(node.keys)), _strings(list(node.values))
            if keys and values and set(keys) & WORDS and set(values) & WORDS:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {dict(zip(keys, values, strict=True))}")
    return found


def test_the_kept_set_and_the_word_maps_are_written_only_in_their_home() -> None:
    copies = [c for p in _sources() if p != HOME for c in _copies(p)]
    assert copies == [], "import these from evodag.decisions instead:\n" + "\n".join(copies)


def test_the_home_itself_is_found_by_the_check() -> None:
    assert _copies(HOME), "the copy detector no longer recognises the definitions it guards"


def test_the_vocabularies_agree() -> None:
    assert set(KEPT_DECISIONS) < set(KEPT_STATUSES) <= set(NODE_STATUSES)
    assert set(SKILL_VERDICT_STATUS.values()) <= set(NODE_STATUSES)
    assert {STATUS_TSV[s] for s in TSV_STATUS.values()} == set(TSV_STATUS)  # a round trip keeps the tsv word
    assert {s for s, word in STATUS_TSV.items() if word == "keep"} == set(KEPT_STATUSES)


@pytest.mark.parametrize(
    ("decisions", "expected"),
    [
        ([], 0),
        (["rejected", "invalid", "no_patch"], 3),
        (["rejected", "accepted", "rejected"], 1),
        (["rejected", "neutral"], 0),
        (["rejected", "no_training_failures", None], 1),
    ],
)
def test_the_stall_rule(decisions: list[str | None], expected: int) -> None:
    assert trailing_stalls(decisions) == expected
    assert running_stalls(decisions)[-1:] == ([expected] if decisions else [])


def test_the_000_seeds_neutral_holds_the_streak() -> None:
    assert stall_after(2, "neutral") == 0
    assert stall_after(2, "neutral", neutral_holds=True) == 2
    assert stall_after(2, "accepted", neutral_holds=True) == 0
    assert running_stalls(["rejected", "neutral", "rejected", "accepted"], neutral_holds=True) == [1, 1, 2, 0]

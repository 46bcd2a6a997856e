"""bench/strategy_docs.py: the README's and docs' strategy tables are what the records print, never typed by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPO
from seed_results import seed_result

sys.path.insert(0, str(REPO / "bench"))
import strategy_docs
import strategy_records
import strategy_table
from strategy_docs import DocsError


def _records(root: Path) -> Path:
    path = root / "bench" / "records" / "r.jsonl"
    for name, seed, test in [("full", 0, 0.9), ("full", 1, 0.8), ("strict_mean", 0, 0.95), ("strict_mean", 1, 0.8)]:
        overrides = strategy_table.overrides_of(name, "neutral")
        strategy_records.append(
            path, strategy_records.Record("f" * 16, "opsdesk.neutral", name, overrides, 30, seed_result(seed, test))
        )
    return path


def _page(part: str) -> str:
    return (
        f"# Title\n\nprose before\n\n<!-- strategy-tables: bench/records/r.jsonl {part} -->\n"
        "| stale | table |\n\n<!-- /strategy-tables -->\n\nprose after\n"
    )


def test_a_region_gets_its_part_of_the_tables_and_the_prose_around_it_stays(tmp_path: Path) -> None:
    _records(tmp_path)
    new = strategy_docs.rewrite(_page("summary"), "page.md", root=tmp_path)
    assert new == (
        "# Title\n\nprose before\n\n<!-- strategy-tables: bench/records/r.jsonl summary -->\n\n"
        "| strategy | opsdesk, neutral |\n"
        "|---|---|\n"
        "| full (the default) | 0.850 |\n"
        "| strict_mean | **+0.025 ± 0.025** |\n"
        "\n<!-- /strategy-tables -->\n\nprose after\n"
    )
    assert strategy_docs.rewrite(new, "page.md", root=tmp_path) == new  # a second pass changes nothing


def test_the_all_part_is_what_strategies_markdown_prints(tmp_path: Path) -> None:
    records = _records(tmp_path)
    printed = subprocess.run(
        [sys.executable, str(REPO / "bench" / "strategies.py"), "--from", str(records), "--markdown"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    new = strategy_docs.rewrite(_page("all"), "page.md", root=tmp_path)
    assert f"-->\n\n{printed}\n<!-- /strategy-tables -->" in new


def test_an_unclosed_region_an_unknown_part_or_a_missing_records_file_is_refused_with_the_page_named(
    tmp_path: Path,
) -> None:
    _records(tmp_path)
    with pytest.raises(DocsError, match=r"page.md: a strategy-tables region is not closed"):
        strategy_docs.rewrite("<!-- strategy-tables: bench/records/r.jsonl all -->\n| x |\n", "page.md", tmp_path)
    with pytest.raises(DocsError, match=r"page.md: unknown part 'cells'; choose from all, summary, bars"):
        strategy_docs.rewrite(_page("cells"), "page.md", root=tmp_path)
    with pytest.raises(DocsError, match=r"page.md: .*nope.jsonl: no such records file"):
        strategy_docs.rewrite(_page("all").replace("r.jsonl", "nope.jsonl"), "page.md", root=tmp_path)


def test_the_repository_pages_state_what_their_records_print() -> None:
    # the README's "How the default compares" and docs/strategies.md: a sweep that adds records must rewrite them
    for page in strategy_docs.PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        assert "<!-- strategy-tables: " in text, page
        assert strategy_docs.rewrite(text, page) == text, f"{page}: run python bench/strategy_docs.py"


def test_a_page_renders_its_sweep_as_recorded_after_a_strategy_is_redefined(tmp_path: Path) -> None:
    # records are history: a strategy defined otherwise today (or gone) keeps its row on the page of its sweep
    path = _records(tmp_path)
    sessions = {"sessions": {"proposer": "neutral"}}
    for name, overrides in [("greedy", {"policies": {"phases": "old"}}), ("retired", {"policies": {"x": 1}})]:
        record = strategy_records.Record(
            "f" * 16, "opsdesk.neutral", name, overrides | sessions, 30, seed_result(0, 0.7)
        )
        strategy_records.append(path, record)
    lines = strategy_docs.tables(path, "summary")
    one = "−0.200, one seed: no s.e. (1 of 2 seeds)"
    assert lines[-2:] == [f"| greedy | {one} |", f"| retired | {one} |"]
    twice = strategy_records.Record(
        "f" * 16, "opsdesk.neutral", "greedy", {"policies": {"phases": "new"}} | sessions, 30, seed_result(1, 0.7)
    )
    strategy_records.append(path, twice)
    with pytest.raises(DocsError, match="greedy was recorded with two definitions"):
        strategy_docs.tables(path, "summary")

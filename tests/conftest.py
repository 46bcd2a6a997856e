"""Shared pytest options: live tests call real LLM APIs and spend money: opt in with `--run-live` (and a key)."""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-live", action="store_true", default=False, help="run tests that call a real LLM API")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run_live = config.getoption("--run-live", default=False)
    has_key = bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("CLAUDE_CODE_OAUTH_TOKEN"))
    for item in items:
        if "live" not in item.keywords:
            continue
        if not run_live:
            item.add_marker(pytest.mark.skip(reason="live test: pass --run-live to call a real API"))
        elif not has_key:
            item.add_marker(pytest.mark.skip(reason="live test: set ANTHROPIC_API_KEY"))

"""Shared pytest options: live tests call real LLM APIs and spend money: opt in with `--run-live` (and a key).

A live test names the variables that can hold its key: `@pytest.mark.live(keys=("OPENAI_API_KEY",))`; the
default is Anthropic's. The marker is read from the item itself (a keyword match would also catch any folder
called `live` on the path).
"""

from __future__ import annotations

import os

import pytest

ANTHROPIC_KEYS = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")
pytest_plugins = ["cli_helpers", "plugins.docs"]  # fixtures: fake CLIs on PATH; parsed docs


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-live", action="store_true", default=False, help="run tests that call a real LLM API")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run_live = config.getoption("--run-live", default=False)
    for item in items:
        marker = item.get_closest_marker("live")
        if marker is None:
            continue
        keys = tuple(marker.kwargs.get("keys", ANTHROPIC_KEYS))
        if not run_live:
            item.add_marker(pytest.mark.skip(reason="live test: pass --run-live to call a real API"))
        elif not any(os.environ.get(k) for k in keys):
            item.add_marker(pytest.mark.skip(reason=f"live test: set {' or '.join(keys)}"))

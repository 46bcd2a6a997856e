"""Where things are, for tests in any folder below `tests/`: the repository, the tests folder, its fixtures and
the plain modules that children run by path (a test file's own `__file__` depends on how deep it sits)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
FAKE_AGENT = TESTS / "fake_agent.py"  # the command backend's scripted agent
METRIC_AGENT = TESTS / "metric_agent.py"  # the command benchmark's scripted agent
FAKE_CLIS = TESTS / "fake_clis"

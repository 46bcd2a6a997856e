"""The real-CLI tier's fixtures: `clis`, the real claude, codex and pi installed from npm (tests/real_clis.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import real_clis


@pytest.fixture(scope="module")
def clis() -> dict[str, Path]:
    """The three CLIs by name, installed once per module when any is missing."""
    return real_clis.install()

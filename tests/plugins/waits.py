"""A polling wait for tests that watch other processes (a tree dying, a file appearing)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

Predicate = Callable[[], bool]


def _wait_until(predicate: Predicate, timeout: float = 30.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


@pytest.fixture(scope="session")
def wait_until() -> Callable[..., bool]:
    """`wait_until(predicate, timeout=30.0, interval=0.05)`: poll until `predicate()` is true; False on timeout
    (the test asserts, with its own message)."""
    return _wait_until

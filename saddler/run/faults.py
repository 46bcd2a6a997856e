"""Fault injection for crash-safety tests: `SADDLER_FAULT=<point>:<n>` SIGKILLs this process at the
n-th time it passes `point` (counted from process start). Unset in normal use: one dict lookup.

Points: `rollout` (a rollout result received, not yet stored), `session` (a diagnosis session returned,
its edits not yet committed), `commit` (a candidate committed, its node not yet stored), `write` (inside
the transaction that stores a node and its edge), `reflect` (lessons being written).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_passes: Counter[str] = Counter()


def fault_point(point: str) -> None:
    spec = os.environ.get("SADDLER_FAULT")
    if not spec:
        return
    name, _, count = spec.partition(":")
    if name != point:
        return
    _passes[point] += 1
    if _passes[point] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)

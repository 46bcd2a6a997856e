"""Fault injection for crash-safety tests: `SADDLER_FAULT=<point>:<n>[:INT]` kills this process at the n-th time
it passes `point` (counted from process start): with SIGKILL, or with SIGINT (as Ctrl-C would) when `:INT` is
given. Unset in normal use: one dict lookup.

Points: `rollout` (a rollout result received, not yet stored), `session` (a diagnosis session recorded, its
edits not yet committed), `evolve` (an evolution session recorded, its action not yet carried out), `commit`
(a candidate committed, its node not yet stored), `write` (inside the transaction that stores a node and its
edge), `reflect` (lessons being written).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_passes: Counter[str] = Counter()
POINTS = ("rollout", "session", "evolve", "commit", "write", "reflect")


def fault_point(point: str) -> None:
    spec = os.environ.get("SADDLER_FAULT")
    if not spec:
        return
    name, _, rest = spec.partition(":")
    if name != point:
        return
    count, _, how = rest.partition(":")
    _passes[point] += 1
    if _passes[point] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGINT if how.upper() == "INT" else signal.SIGKILL)

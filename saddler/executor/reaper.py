"""Finding and killing every process of a rollout.

A rollout's processes are the descendants of the subreaper holding it (its fork server, or the spawned
child while it lives), its process group, and anything else carrying its marker variable in its initial
environment (`/proc/<pid>/environ`): whatever escaped by `setsid` or a double fork is found one way or
the other.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Collection
from pathlib import Path

from saddler.executor.environment import MARKER_VAR
from saddler.procs import is_running, kill_descendants, kill_until_gone, pids_with_env

TAIL_BYTES = 2048


def marked_pids(*markers: str) -> list[int]:
    """Pids of live processes whose initial environment carries one of `markers` (one pass over /proc)."""
    return pids_with_env(*(f"{MARKER_VAR}={marker}" for marker in markers))


def kill_rollout(
    pgid: int | None, *markers: str, root: int | None = None, spare: Collection[int] = (), rounds: int = 20,
    settle_s: float = 2.0,
) -> None:  # fmt: skip
    """SIGKILL every process of a rollout: the descendants of `root` (a subreaper holding the rollout's
    orphans; a spared pid's own descendants are then killed, never the spared pid), the process group `pgid` (if any),
    and every process carrying one of `markers` (never one in `spare`: the fork server, bwrap around it);
    repeat until none is left, then wait (up to `settle_s`) until each one killed has finished dying."""
    killed: set[int] = set()
    if root is not None:
        killed.update(kill_descendants(root))
    if pgid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    if markers:  # without markers (a pid namespace holds the rollout: `root` finds all of it) no /proc scan
        killed.update(
            kill_until_gone(lambda: [pid for pid in marked_pids(*markers) if pid not in spare], rounds, 0.005)
        )
    deadline = time.monotonic() + settle_s
    dying = [pid for pid in killed if is_running(pid)]
    while dying and time.monotonic() < deadline:
        time.sleep(0.002)
        dying = [pid for pid in dying if is_running(pid)]


def tail_of(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of a file as text ("" when unreadable)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""

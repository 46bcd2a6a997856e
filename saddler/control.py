"""What a person can do to a run from outside it, the same way for the main loop and the seed modes.

A run is asked to pause or stop through sentinel files it checks at iteration boundaries (the main loop's
`RUN/PAUSE` and `RUN/STOP`; fleet mode's `.paused`, the 002 seed's name), is seen running while a process holds
its run lock (`saddler.runlock`), and is killed by signalling that holder: SIGTERM, then SIGKILL when it still
holds the lock after a grace period. `kill` returns only once the lock is free, so a new `run` can follow at
once. Everything a run starts dies with it (rollouts with their fork server, agents with their supervisor).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saddler.errors import RunStateError
from saddler.runlock import LOCK_FILE, lock_holder

PAUSED, STOP_REQUESTED = "paused", "stop_requested"
SCHEDULE_FILE = "schedule.json"
"""The run folder's file of what is in flight now, written by the running loop (`saddler.run.pipeline`): iterations
in flight, sandboxes busy, rollouts queued, the search's ETA. `saddler status` and the dashboard read it."""


def read_schedule(run_dir: Path) -> dict[str, Any] | None:
    """What `schedule.json` says now (None when the run has none or it cannot be read)."""
    try:
        found = json.loads((Path(run_dir) / SCHEDULE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class RunControls:
    """The controls of the run folder `root`; `pause_name` / `stop_name` are its sentinel files."""

    root: Path
    pause_name: str = "PAUSE"
    stop_name: str = "STOP"

    @property
    def pause_file(self) -> Path:
        return Path(self.root) / self.pause_name

    @property
    def stop_file(self) -> Path:
        return Path(self.root) / self.stop_name

    def request_pause(self) -> None:
        """Ask the run to pause at its next iteration boundary (the file holds when it was asked)."""
        self.pause_file.write_text(_now(), encoding="utf-8")

    def request_stop(self) -> None:
        """Ask the run to end (and finish: test, export, report) after its current iteration."""
        self.stop_file.write_text(_now(), encoding="utf-8")

    def clear(self) -> list[str]:
        """Withdraw both requests; the names of the sentinel files that were there."""
        cleared = [p.name for p in (self.stop_file, self.pause_file) if p.exists()]
        for path in (self.stop_file, self.pause_file):
            path.unlink(missing_ok=True)
        return cleared

    def asked(self) -> str | None:
        """`stop_requested` or `paused` when a sentinel asks for it (stop first), else None."""
        if self.stop_file.exists():
            return STOP_REQUESTED
        if self.pause_file.exists():
            return PAUSED
        return None

    def holder(self) -> int | None:
        """The pid of the live process running this folder (0 when unreadable), or None when none runs it."""
        return lock_holder(Path(self.root))

    def running(self) -> bool:
        return self.holder() is not None

    def kill(
        self, grace_s: float = 10.0, *, then: Callable[[], list[int]] | None = None, pid: int | None = None
    ) -> list[int]:
        """End the process running this folder now: SIGTERM, SIGKILL after `grace_s` if it still holds the lock.

        `then` runs after the signal (a mode's own clean-up, e.g. its agent tree and tagged orphans) and returns
        the pids it killed. `pid` names the holder when the lock file does not (a mode's own pid file). Returns
        every pid signalled, once the lock is free; `RunStateError` when the lock is still held after the SIGKILL
        (something else holds it: the message says how to find it)."""
        killed: list[int] = []
        holder = self.holder()
        if holder == 0:  # held, but the lock file names no pid
            holder = pid or 0
        if holder and holder != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(holder, signal.SIGTERM)
                killed.append(holder)
        if then is not None:
            killed += then()
        if holder and holder != os.getpid() and not _wait(lambda: not self.running(), grace_s):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(holder, signal.SIGKILL)
            if not _wait(lambda: not self.running(), grace_s):
                lock = Path(self.root) / LOCK_FILE
                raise RunStateError(
                    f"the run lock {lock} is still held after killing process {holder}; find its holder with "
                    f"`fuser {lock}` and end it before running {self.root} again"
                )
        return killed


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def _wait(done: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True

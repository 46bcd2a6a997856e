"""A run folder's single-writer lock (`RUN/.lock`): who may change the folder, and whether anyone is running it.

The lock is an `flock` on `RUN/.lock`, which also holds the holder's pid. The kernel drops it when the holder
exits, however it exits (SIGKILL included), so "the lock is free" means "nobody runs this folder": a run row
that still says `running` then belongs to a process that is gone. `lock_holder` asks without taking the lock
for more than an instant (a shared lock, released at once); `run_lock` retries for a moment so such a probe
never makes a starting run fail.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from saddler.errors import RunStateError
from saddler.procs import read_pid

LOCK_FILE = ".lock"
_RETRY_S = 0.5


@dataclass(frozen=True)
class RunLock:
    """A held run lock: the lock file, this process's pid, and when it was taken (seconds since the epoch).
    Anything in the folder left by an earlier holder (a git `*.lock` file, say) is older than `acquired_at`."""

    path: Path
    pid: int
    acquired_at: float


@contextmanager
def run_lock(run_dir: Path) -> Iterator[RunLock]:
    """Hold `run_dir`'s writer lock for the block; `RunStateError` (naming the holder's pid) if a live process
    holds it."""
    path = Path(run_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + _RETRY_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError as exc:
                if time.monotonic() >= deadline:
                    pid = read_pid(path)
                    who = f"process {pid}" if pid else "another process"
                    raise RunStateError(
                        f"{run_dir} is being run by {who} (lock {path}); wait for it to finish or "
                        f"`saddler stop {run_dir}`"
                    ) from exc
                time.sleep(0.02)
        acquired = time.time()
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield RunLock(path, os.getpid(), acquired)
    finally:
        os.close(fd)


def lock_holder(run_dir: Path) -> int | None:
    """The pid of the live process holding `run_dir`'s lock (0 when it cannot be read), or None when nobody
    holds it (no run in progress: a `running` run row is left over from a process that died)."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return read_pid(path) or 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

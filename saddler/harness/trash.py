"""Folders deleted off the critical path: renamed out of the way at once, removed by a background thread.

Deleting a worktree costs one unlink per file, which on a journaled disk is slow next to everything else an
iteration does; nothing waits for it. `discard` renames the folder into the trash (the name is free at once and
git sees the worktree gone), one daemon thread removes it; `empty` waits for that thread and removes whatever is
left, including what a crash left behind.
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
import uuid
from pathlib import Path


class Trash:
    """A trash folder `root` (on the same filesystem as what is discarded into it) and its emptying thread."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._queue: queue.Queue[Path] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def discard(self, path: Path) -> None:
        """Make `path` disappear now and its content later; removed right away when it cannot be moved."""
        self.root.mkdir(parents=True, exist_ok=True)
        target = self.root / uuid.uuid4().hex
        try:
            os.rename(path, target)
        except OSError:  # another filesystem, or already gone
            shutil.rmtree(path, ignore_errors=True)
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="saddler-trash", daemon=True)
                self._thread.start()
        self._queue.put(target)

    def _work(self) -> None:
        while True:
            path = self._queue.get()
            try:
                shutil.rmtree(path, ignore_errors=True)
            finally:
                self._queue.task_done()

    def empty(self) -> None:
        """Wait until everything discarded is removed, then remove anything else in the trash."""
        self._queue.join()
        if self.root.is_dir():
            shutil.rmtree(self.root, ignore_errors=True)

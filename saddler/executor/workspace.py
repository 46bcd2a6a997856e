"""A rollout's private folder: its own copy of the harness, its own trace folder and HOME; traces landed after.

No rollout ever gets a path another rollout or the optimizer writes to: it runs on a copy of the harness made for
it alone (`HarnessCopies`: each harness tree is read once into memory, then written out per rollout, so a file
planted in the shared snapshot after that changes nothing), writes its traces into its private folder, and the
parent moves them (regular files only: a symlink could point anywhere) into the run's trace folder afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path

from saddler.benchmark import RolloutResult
from saddler.errors import disk_full_as
from saddler.executor.base import RolloutJob

MAX_CACHED_BYTES = 256 * 1024 * 1024  # all trees held in memory together
MAX_TREE_BYTES = 64 * 1024 * 1024  # a larger harness is copied from its snapshot for every rollout instead


@dataclass(frozen=True)
class _Entry:
    rel: str
    kind: str  # "d" directory, "f" regular file, "l" symlink
    mode: int
    data: bytes = b""


def read_tree(root: Path) -> tuple[list[_Entry], int] | None:
    """Every directory, regular file and symlink under `root` (parents before children) and the bytes they hold;
    None when they hold more than `MAX_TREE_BYTES`."""
    entries: list[_Entry] = []
    total = 0
    for folder, dirs, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(folder, name)
            rel = name if rel_folder == "." else os.path.join(rel_folder, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                entries.append(_Entry(rel, "l", 0, os.readlink(path).encode("utf-8", "surrogateescape")))
            elif stat.S_ISDIR(info.st_mode):
                entries.append(_Entry(rel, "d", stat.S_IMODE(info.st_mode)))
            elif stat.S_ISREG(info.st_mode):
                total += info.st_size
                if total > MAX_TREE_BYTES:
                    return None
                with open(path, "rb") as fh:
                    entries.append(_Entry(rel, "f", stat.S_IMODE(info.st_mode), fh.read()))
    return entries, total


class HarnessCopies:
    """Private copies of harness trees, one per rollout; thread-safe. Trees are kept in memory (least recently
    used first out) up to `MAX_CACHED_BYTES`, keyed by (tree, snapshot folder). A tree found too big to keep is
    remembered, so later rollouts copy it from its snapshot without reading it into memory again."""

    def __init__(self, max_bytes: int = MAX_CACHED_BYTES) -> None:
        self.max_bytes = max_bytes
        self._trees: OrderedDict[tuple[str, str], tuple[list[_Entry], int]] = OrderedDict()
        self._too_big: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def copy(self, source: Path, tree: str, dest: Path) -> None:
        """Write the harness at `source` (whose git tree is `tree`) into the new folder `dest`."""
        loaded = self._load(Path(source), tree)
        if loaded is None:
            shutil.copytree(source, dest, symlinks=True)
            return
        os.mkdir(dest, 0o700)
        for entry in loaded[0]:
            path = os.path.join(dest, entry.rel)
            if entry.kind == "d":
                os.mkdir(path, entry.mode | 0o700)
            elif entry.kind == "l":
                os.symlink(entry.data.decode("utf-8", "surrogateescape"), path)
            else:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, entry.mode | 0o600)
                try:
                    os.write(fd, entry.data)
                finally:
                    os.close(fd)

    def _load(self, source: Path, tree: str) -> tuple[list[_Entry], int] | None:
        key = (tree, str(source))
        with self._lock:
            if key in self._trees:
                self._trees.move_to_end(key)
                return self._trees[key]
            if key in self._too_big:
                return None
            loaded = read_tree(source)
            if loaded is None or loaded[1] > self.max_bytes:
                self._too_big.add(key)
                return None
            self._trees[key] = loaded
            while sum(size for _, size in self._trees.values()) > self.max_bytes:
                self._trees.popitem(last=False)
            return loaded


@dataclass(frozen=True)
class RolloutFolder:
    """The layout of one rollout's private folder `root` (the only place the rollout may write)."""

    root: Path

    @property
    def harness(self) -> Path:
        return self.root / "harness"

    @property
    def trace(self) -> Path:
        return self.root / "trace"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def file(self, name: str) -> Path:
        """job.json, result.json, stdout.log or stderr.log."""
        return self.root / name

    def prepare(self, job: RolloutJob, copies: HarnessCopies) -> RolloutJob:
        """Copy the harness in, make the trace folder and HOME, write job.json; the job as the rollout sees it."""
        copies.copy(Path(job.harness_dir), job.tree, self.harness)
        self.trace.mkdir()
        self.home.mkdir()
        private = replace(job, harness_dir=str(self.harness), trace_dir=str(self.trace))
        self.file("job.json").write_text(private.to_json(), encoding="utf-8")
        return private

    def land(self, result: RolloutResult, job: RolloutJob) -> RolloutResult:
        """Move the rollout's traces into `job.trace_dir` and make the result name the paths the run knows."""
        dest = Path(job.trace_dir)
        with disk_full_as("a rollout's traces", dest):  # the run folder is full, not the private one
            for folder, _dirs, files in os.walk(self.trace):
                for name in files:
                    src = Path(folder) / name
                    if not stat.S_ISREG(os.lstat(src).st_mode):
                        continue
                    target = dest / src.relative_to(self.trace)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, target, follow_symlinks=False)
        moves = ((str(self.trace), str(dest)), (str(self.harness), job.harness_dir))
        if result.trace_path and result.trace_path.startswith(str(self.trace) + os.sep):
            result.trace_path = str(dest) + result.trace_path[len(str(self.trace)) :]
        for old, new in moves:
            if isinstance(result.error_tail, str):
                result.error_tail = result.error_tail.replace(old, new)
            if isinstance(result.rationale, str):
                result.rationale = result.rationale.replace(old, new)
        return result


def remove_tree(path: Path) -> bool:
    """Remove `path` even when what ran in it took its own permissions away (chmod 000); True when it is gone."""
    tried: set[str] = set()

    def unlock(_func: object, failed: str, _exc: object) -> None:
        if failed in tried:
            return
        tried.add(failed)
        for target in (os.path.dirname(failed), failed):
            if os.path.isdir(target) and not os.path.islink(target):
                with contextlib.suppress(OSError):
                    os.chmod(target, 0o700)
        with contextlib.suppress(OSError):
            if os.path.isdir(failed) and not os.path.islink(failed):
                shutil.rmtree(failed, onerror=unlock)
            else:
                os.unlink(failed)

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=unlock)
    return not os.path.lexists(path)

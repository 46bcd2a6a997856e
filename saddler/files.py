"""Whole-file writes: a reader (or a crash, or a full disk) sees the old file or the new one, never half of one.
And `remove_path`: a file, symlink or folder removed alike."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary sibling of `path` to write; it replaces `path` when the block ends without error and is
    removed otherwise."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) in one step."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def remove_path(path: Path) -> None:
    """Delete `path`: a folder with all it holds, or a file or symlink (a symlink to a folder is unlinked, never
    followed); nothing when it does not exist."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)

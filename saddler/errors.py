"""Every exception saddler raises on purpose. A failing candidate is data, never one of these.

Messages say what to do next.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager


class SaddlerError(Exception):
    """Base class: a system fault or a user error that stops the command."""

    exit_code = 1


class ConfigError(SaddlerError):
    """Invalid configuration; the message lists every error with its dotted path."""

    exit_code = 2


class HandoffRefusedError(ConfigError):
    """The hand-off branch cannot be written where asked (exit 2; `saddler.run.handoff`): a dirty or mismatched
    repository, an existing branch, no `gh` for `--open-pr`. The message says what to do."""


class WarmStartMismatchError(ConfigError):
    """The warm-start run is of another harness baseline or benchmark (exit 2; `--force` takes it anyway;
    `saddler.run.warmstart`)."""


class UnknownNameError(SaddlerError):
    """An unknown registered name (backend, benchmark, policy, template)."""

    exit_code = 2

    def __init__(self, kind: str, name: str, available: list[str] | tuple[str, ...]):
        self.kind, self.name, self.available = kind, name, list(available)
        super().__init__(f"unknown {kind} {name!r}; available: {', '.join(sorted(self.available))}")


class HarnessError(SaddlerError):
    """The harness repository cannot be used (not a git repo, bad saddler.toml, git failure)."""


class ExecutorError(SaddlerError):
    """The executor itself cannot run (missing sandbox, ray not installed, cluster unreachable)."""


class RolloutsFailedError(SaddlerError):
    """No rollout of the baseline could run (every one an `infra_error`): the benchmark or the machine is broken,
    not the harness; the message quotes the first error."""


class BackendError(SaddlerError):
    """An optimizer backend cannot run at all (missing CLI, missing credentials)."""


class AuthenticationError(BackendError):
    """Credentials are missing or rejected; the message names the variable to set."""


class RunStateError(SaddlerError):
    """The run folder is missing, locked by another process, or inconsistent."""


class FolderRefusedError(RunStateError):
    """A folder cannot be used as asked (not empty without `--force`, holds no run to replace): nothing was
    changed, and the user chooses another folder."""

    exit_code = 2


class UncommittedHarnessError(HarnessError):
    """The harness repository has changes a run would leave out (uncommitted files, no commit at all): the user
    commits them or passes `--include-uncommitted`."""

    exit_code = 2


class ChangedInputsError(SaddlerError):
    """A run's results-affecting inputs changed since it started; `changed` names the dotted keys."""

    exit_code = 2

    def __init__(self, message: str, changed: list[str]):
        self.changed = list(changed)
        super().__init__(message)


class DiskFullError(SaddlerError):
    """A write failed for lack of space or quota. Nothing half-written is kept: free space and run again."""

    def __init__(self, what: str, where: object | None) -> None:
        self.what, self.where = what, None if where is None else str(where)
        free = free_space(self.where) if self.where else ""
        place = f" to {self.where}" if self.where else ""
        super().__init__(
            f"disk full: {what} could not write{place} (no space left on device{f'; {free} free' if free else ''}); "
            "free space and run again (`saddler run` resumes where it stopped)"
        )


@contextmanager
def disk_full_as(what: str, where: object) -> Iterator[None]:
    """Turn an `OSError(ENOSPC/EDQUOT)` raised inside the block into `DiskFullError(what, where)`."""
    try:
        yield
    except OSError as exc:
        from evodag.connection import is_disk_full

        if is_disk_full(exc):
            raise DiskFullError(what, written_path(exc) or where) from exc
        raise


def written_path(exc: OSError) -> str | None:
    """The file a failed write was writing: a copy or a move names its source first and its destination second."""
    return getattr(exc, "filename2", None) or getattr(exc, "filename", None)


class AccessError(SaddlerError):
    """A path cannot be written: permission denied or a read-only file system."""

    exit_code = 2


def free_space(path: str) -> str:
    """Free space on the file system holding `path` (its nearest existing folder), e.g. "12 KiB"; "" if unknown."""
    import shutil
    from pathlib import Path

    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = float(shutil.disk_usage(probe).free)
    except OSError:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if free < 1024 or unit == "GiB":
            return f"{free:.0f} {unit}" if unit == "B" else f"{free:.1f} {unit}"
        free /= 1024
    return ""  # pragma: no cover


def as_user_error(exc: BaseException) -> SaddlerError | None:
    """The one-line error a command shows for an environment fault, or None for anything else (a bug keeps its
    traceback): disk full (OS or SQLite), permission denied / read-only file system, any other SQLite error; a
    `SaddlerError` is its own one line."""
    import sqlite3

    from evodag.connection import is_disk_full

    if isinstance(exc, SaddlerError):
        return exc  # already the one line
    if is_disk_full(exc):  # OS (ENOSPC, EDQUOT) or SQLite (SQLITE_FULL)
        if isinstance(exc, sqlite3.Error):
            return DiskFullError("SQLite", "the EvoDAG (evodag.sqlite)")
        return DiskFullError("saddler", written_path(exc) if isinstance(exc, OSError) else None)
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = "read-only file system" if exc.errno == errno.EROFS else "permission denied"
        return AccessError(
            f"{what}: {exc.filename or 'a file'} cannot be written; make the folder writable by this user or "
            "choose another one"
        )
    if isinstance(exc, sqlite3.Error):
        text = str(exc)
        if "locked" in text:
            return RunStateError(f"the EvoDAG is locked by another process ({text}); wait for it, then run again")
        return SaddlerError(f"SQLite failed: {text}; if this repeats, check the disk and evodag.sqlite")
    return None

"""git's stdin-driven modes kept running for a whole run: a process per ref update costs ~3 ms, a request to a
running one ~0.2 ms, and a run updates refs after every commit.

`RefWriter` is one `git update-ref --no-deref --stdin` whose every `update(refs)` is one transaction: `start`, an
`update` line per ref, `commit`, answered `start: ok` and `commit: ok` (git flushes each answer). git exits on a
failed transaction: the error is raised as `git(...)` would raise it (`HarnessError`, or `DiskFullError` for a full
disk) and the next call starts a new process. Calls are serialized (a lock); `close()` ends the process (also done
when the object is collected, and by git itself when this process exits: its stdin closes).
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path
from typing import IO

from saddler.errors import HarnessError
from saddler.harness import gitcmd

_ARGS = ("update-ref", "--no-deref", "--stdin")


class RefWriter:
    """Ref updates of the repository `repo_dir` through one long-lived `git update-ref --stdin` (see the module)."""

    def __init__(self, repo_dir: Path) -> None:
        self.repo_dir = Path(repo_dir)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._err: IO[bytes] | None = None
        self._stop: weakref.finalize | None = None

    def update(self, refs: dict[str, str]) -> None:
        """Set every ref of `refs` (name -> full sha) in one transaction; a worktree's HEAD is
        `worktrees/<id>/HEAD`. Nothing is set when any update fails (then `HarnessError` says why)."""
        if not refs:
            return
        lines = ["start", *(f"update {name} {sha}" for name, sha in refs.items()), "commit"]
        request = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
        with self._lock:
            proc = self._running()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(request)
                proc.stdin.flush()
                answers = [proc.stdout.readline(), proc.stdout.readline()]
            except OSError:
                answers = []
            if answers != [b"start: ok\n", b"commit: ok\n"]:
                self._fail(refs)

    def close(self) -> None:
        """End the process (no transaction is ever left open between calls)."""
        with self._lock:
            self._end()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._end()
            self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed by `_end`
            self._proc = gitcmd.git_pipe(_ARGS, self.repo_dir, self._err)
            self._stop = weakref.finalize(self, _stop, self._proc, self._err)
        return self._proc

    def _end(self) -> None:
        if self._stop is not None:
            self._stop()
        self._proc, self._err, self._stop = None, None, None

    def _fail(self, refs: dict[str, str]) -> None:
        """git refused the transaction (and exits): say why, forget the process."""
        proc, err = self._proc, self._err
        assert proc is not None and err is not None
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace").strip()
        self._end()
        gitcmd.raise_if_disk_full(stderr, _ARGS, self.repo_dir)
        raise HarnessError(
            f"git update-ref --stdin failed in {self.repo_dir} (exit {proc.returncode}) setting "
            f"{', '.join(sorted(refs))}: {stderr[-800:] or 'no message'}"
        )


def _stop(proc: subprocess.Popen[bytes], err: IO[bytes]) -> None:
    """Close git's input (it ends there) and collect it; kill it if a forked child still holds that input open."""
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    err.close()

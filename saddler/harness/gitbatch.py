"""git's stdin-driven modes kept running for a whole run: a git process costs ~3 ms to start, a request to a
running one ~0.2 ms, and a run sets refs after every commit and reads every candidate's tree.

`RefWriter` is one `git update-ref --no-deref --stdin` whose every `update(refs)` is one transaction: `start`, an
`update` line per ref, `commit`, answered `start: ok` and `commit: ok` (git flushes each answer). git exits on a
failed transaction: the error is raised as `git(...)` would raise it (`HarnessError`, or `DiskFullError` for a full
disk) and the next call starts a new process.

`ObjectReader` is one `git cat-file --batch`: `read(name)` answers an object's sha, type and bytes (None when the
name names nothing), and `extract(tree, dest)` writes a tree's files (modes, symlinks, empty folders for
submodules) from those reads. The bytes are the committed ones: a tree with a `.gitattributes` (whose filters,
line endings or `export-ignore` `git archive` and a checkout would apply) is refused, and the caller uses
`git archive` for it.

Calls are serialized (a lock); `close()` ends the process (also done when the object is collected, and by git
itself when this process exits: its stdin closes).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from saddler.errors import HarnessError
from saddler.harness import gitcmd

_FILE_MODES = {b"100644": 0o644, b"100755": 0o755}


class _LongLivedGit:
    """One long-lived `git <args>` of `repo_dir`, started on first use and again after it died."""

    args: tuple[str, ...] = ()

    def __init__(self, repo_dir: Path) -> None:
        self.repo_dir = Path(repo_dir)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._err: IO[bytes] | None = None
        self._stop: weakref.finalize | None = None

    def close(self) -> None:
        """End the process (nothing is ever left half-asked between calls)."""
        with self._lock:
            self._end()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._end()
            self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed by `_end`
            self._proc = gitcmd.git_pipe(self.args, self.repo_dir, self._err)
            self._stop = weakref.finalize(self, _stop, self._proc, self._err)
        return self._proc

    @contextlib.contextmanager
    def _exchange(self) -> Iterator[subprocess.Popen[bytes]]:
        """The running process for one request and its answer; whatever stops the exchange half-way (Ctrl-C, a
        fault) ends the process, so no half-read answer reaches the next request."""
        proc = self._running()
        try:
            yield proc
        except BaseException:
            self._end()
            raise

    def _end(self) -> None:
        if self._stop is not None:
            self._stop()
        self._proc, self._err, self._stop = None, None, None

    def _fail(self, what: str) -> HarnessError:
        """git refused or died (and exits): forget the process; the error to raise, saying why."""
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
        gitcmd.raise_if_disk_full(stderr, self.args, self.repo_dir)
        return HarnessError(
            f"git {' '.join(self.args)} failed in {self.repo_dir} (exit {proc.returncode}) {what}: "
            f"{stderr[-800:] or 'no message'}"
        )


class RefWriter(_LongLivedGit):
    """Ref updates of the repository `repo_dir` through one long-lived `git update-ref --stdin` (see the module)."""

    args = ("update-ref", "--no-deref", "--stdin")

    def update(self, refs: dict[str, str]) -> None:
        """Set every ref of `refs` (name -> full sha) in one transaction; a worktree's HEAD is
        `worktrees/<id>/HEAD`. Nothing is set when any update fails (then `HarnessError` says why)."""
        if not refs:
            return
        lines = ["start", *(f"update {name} {sha}" for name, sha in refs.items()), "commit"]
        request = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
        with self._lock, self._exchange() as proc:
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(request)
                proc.stdin.flush()
                answers = [proc.stdout.readline(), proc.stdout.readline()]
            except OSError:
                answers = []
            if answers != [b"start: ok\n", b"commit: ok\n"]:
                raise self._fail(f"setting {', '.join(sorted(refs))}")


class ObjectReader(_LongLivedGit):
    """Object reads of the repository `repo_dir` through one long-lived `git cat-file --batch` (see the module)."""

    args = ("cat-file", "--batch")

    def read(self, name: str) -> tuple[str, str, bytes] | None:
        """(sha, type, content) of the object `name` names (a sha, `rev^{tree}`, `rev:path`), or None."""
        if "\n" in name or not name.strip():
            raise HarnessError(f"object name {name!r} cannot be asked of git cat-file --batch")
        with self._lock, self._exchange() as proc:
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(name.encode("utf-8", "surrogateescape") + b"\n")
                proc.stdin.flush()
                header = proc.stdout.readline()
                parts = header.split()
                if len(parts) == 3 and parts[2].isdigit():
                    body = proc.stdout.read(int(parts[2]) + 1)  # the content, then a newline
                    if len(body) == int(parts[2]) + 1:
                        return parts[0].decode(), parts[1].decode(), body[:-1]
                elif header.endswith((b" missing\n", b" ambiguous\n")):
                    return None
            except OSError:
                pass
            raise self._fail(f"reading {name!r}")

    def extract(self, tree: str, dest: Path) -> bool:
        """Write the files of `tree` (a tree sha) into the existing empty folder `dest`; False, with nothing written,
        when the tree has a `.gitattributes` anywhere (see the module)."""
        entries = self._walk(tree, "")
        if entries is None:
            return False
        for rel, mode, sha in entries:
            path = os.path.join(dest, rel)
            if mode == b"40000" or mode == b"160000":  # a folder, or a submodule (its folder, empty)
                os.mkdir(path, 0o755)
                os.chmod(path, 0o755)
                continue
            found = self.read(sha)
            if found is None:
                raise HarnessError(f"object {sha} of tree {tree} is missing from {self.repo_dir}")
            if mode == b"120000":
                os.symlink(found[2].decode("utf-8", "surrogateescape"), path)
                continue
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                data = memoryview(found[2])
                while data:  # a write may take less than it is given (a size limit, a nearly full disk)
                    data = data[os.write(fd, data) :]
                os.fchmod(fd, _FILE_MODES.get(mode, 0o644))
            finally:
                os.close(fd)
        return True

    def _walk(self, tree: str, prefix: str) -> list[tuple[str, bytes, str]] | None:
        """(path, mode, sha) of every entry under `tree`, folders before what they hold; None on a `.gitattributes`."""
        found = self.read(tree)
        if found is None or found[1] != "tree":
            raise HarnessError(f"{tree} is not a tree of {self.repo_dir}")
        out: list[tuple[str, bytes, str]] = []
        data, at = found[2], 0
        while at < len(data):
            space = data.index(b" ", at)
            nul = data.index(b"\0", space)
            mode, name = data[at:space], data[space + 1 : nul].decode("utf-8", "surrogateescape")
            sha, at = data[nul + 1 : nul + 21].hex(), nul + 21
            if name == ".gitattributes":
                return None
            rel = prefix + name
            out.append((rel, mode, sha))
            if mode == b"40000":
                below = self._walk(sha, rel + "/")
                if below is None:
                    return None
                out += below
        return out


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

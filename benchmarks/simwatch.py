"""Watching which benchmark files untrusted harness code opens: the trace side of the cheat audit of the bundled
simulated benchmarks (opsdesk, repofix).

Contract: inside `with WatchReads(harness_dir, watched, log):`, each open of a file under `watched` (the benchmarks'
own folder: grader, tasks, hidden tests) whose nearest caller outside the standard library is code under
`harness_dir` is passed to `log` as `{"type": "file_read", "path": <path relative to watched>}`; imports are not
reads. One audit hook, installed on first use, serves the whole process and records nothing outside such a block.
Rollout children import this module: it imports only the stdlib at run time.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WATCH: list[Any] = []  # [(harness root + sep, watched folder's prefixes, log)] while a rollout's harness code runs
_HOOKED: list[bool] = []
_PREFIXES: dict[str, tuple[str, ...]] = {}  # a folder -> its absolute and real path + sep (real: once, it is slow)


def _prefixes(folder: str) -> tuple[str, ...]:
    if folder not in _PREFIXES:
        _PREFIXES[folder] = tuple(
            dict.fromkeys(p + os.sep for p in (os.path.abspath(folder), os.path.realpath(folder)))
        )
    return _PREFIXES[folder]


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _WATCH or not isinstance(args[0], str):
        return
    harness, watched, log = _WATCH[-1]
    path = os.path.abspath(args[0])  # no system call yet
    root = next((w for w in watched if path.startswith(w)), None)
    frame = sys._getframe(1)
    while frame is not None:  # the nearest caller outside the standard library; an import is no read
        name = frame.f_code.co_filename
        if name.startswith("<frozen importlib"):
            return
        if not name.startswith(_STDLIB):
            break
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None or not os.path.abspath(frame.f_code.co_filename).startswith(harness):
        return
    if root is None:  # harness code opened another path: a symlinked file or folder on it may lead in
        path = os.path.realpath(path)
        root = next((w for w in watched if path.startswith(w)), None)
        if root is None:
            return
    log({"type": "file_read", "path": path[len(root) :].replace(os.sep, "/")})


def _stdlib() -> tuple[str, ...]:
    import sysconfig

    return tuple(p for k in ("stdlib", "platstdlib") for p in _prefixes(sysconfig.get_paths()[k]))


# resolved once on import (a fork server's rollouts inherit them): real paths take a system call per component
_STDLIB = _stdlib()
_prefixes(os.path.dirname(os.path.abspath(__file__)))


class WatchReads:
    """While harness code runs: every file under `watched` (the benchmarks' own folder: grader, tasks, hidden
    tests) that code in `harness_dir` opens is logged as a `file_read` event (an audit hook, installed once per
    process; it records nothing outside this block)."""

    def __init__(self, harness_dir: str, watched: str, log: Callable[[dict[str, Any]], None]) -> None:
        self.entry = (os.path.abspath(harness_dir) + os.sep, _prefixes(watched), log)

    def __enter__(self) -> None:
        if not _HOOKED:
            sys.addaudithook(_on_audit)
            _HOOKED.append(True)
        _WATCH.append(self.entry)

    def __exit__(self, *exc: object) -> None:
        _WATCH.remove(self.entry)

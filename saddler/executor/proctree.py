"""Process trees from /proc, and making a process the reaper of its orphaned descendants.

Import-light (stdlib `os`, `ctypes` on demand): rollout children and the fork server use it. A process that
is a *child subreaper* inherits its descendants' orphans (a `setsid` + double fork cannot leave its tree),
so "every descendant of X" names a rollout's processes whatever they did to their session or environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux >= 3.4); False where unsupported."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent() -> bool:
    """SIGKILL this process when the thread that started it exits (Linux); False where unsupported. If the
    parent is already gone (the race before the call), exit at once."""
    parent = os.getppid()
    try:
        import ctypes

        ok = int(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:
        os._exit(1)
    return ok


def is_running(pid: int) -> bool:
    """True while `pid` exists and has not finished dying (a zombie counts as finished)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[-1].split()[0] not in (b"Z", b"X")


def descendants(root: int) -> list[int]:
    """Pids of every live (non-zombie) descendant of `root`, not `root` itself."""
    found: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except OSError:
                continue
            for kid in kids:
                if kid not in found:
                    found.append(kid)
                    todo.append(kid)
    return [pid for pid in found if is_running(pid)]


def kill_until_gone(find: Callable[[], list[int]], rounds: int, pause_s: float = 0.0) -> list[int]:
    """SIGKILL every pid `find()` returns, again and again (up to `rounds`) until it returns none;
    the pids killed. New processes forked meanwhile are caught by the next round."""
    killed: list[int] = []
    for _ in range(rounds):
        pids = find()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        if pause_s:
            time.sleep(pause_s)
    return killed


def kill_descendants(root: int, rounds: int = 50) -> list[int]:
    """SIGKILL every descendant of `root` until none is left running; the pids killed."""
    return kill_until_gone(lambda: descendants(root), rounds)


def reap_zombies() -> None:
    """Collect every exited child of this process without blocking."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return

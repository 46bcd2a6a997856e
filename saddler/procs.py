"""Processes: the one runner for external commands, process trees from /proc, subreapers, dying with a parent.

Stdlib only (`ctypes` on demand), so rollout children, the fork server and benchmark plugins may import it.
`run_process_group` is how saddler runs every external program it waits for (CLI agents, eval commands,
judges): its own session and process group, stdin closed or fed from text, SIGKILL when this process dies,
the whole group killed on timeout. A process that is a *child subreaper* inherits its descendants' orphans
(a `setsid` + double fork cannot leave its tree), so "every descendant of X" names a rollout's processes
whatever they did to their session or environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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


@dataclass
class ProcessRun:
    """What one external command did: exit code (None after a timeout), output, whether it timed out."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


def run_process_group(
    argv: Sequence[str] | str,
    *,
    cwd: Path | str,
    env: Mapping[str, str] | None = None,
    timeout_s: float,
    stdin_text: str | None = None,
    shell: bool = False,
    on_line: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> ProcessRun:
    """Run a command to completion in its own session and process group; never raises for its failure.

    `stdin_text` is written to its stdin (then closed); otherwise stdin is /dev/null. `on_line` receives each
    stdout line as it arrives (a log that can be followed); `on_start` the pid. The child is SIGKILLed if this
    process dies, and on timeout its whole process group is SIGKILLed (`timed_out`, `returncode` None).
    """
    started = time.monotonic()
    command = [str(a) for a in ([argv] if isinstance(argv, str) else argv)]
    if shell:
        command = ["/bin/sh", "-c", " ".join(command)]
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "saddler.procs", *command],  # sets PDEATHSIG, then execs the command
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )
    if on_start is not None:
        on_start(proc.pid)
    out_lines: list[str] = []
    err_parts: list[str] = []

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out_lines.append(line)
            if on_line is not None:
                on_line(line.rstrip("\n"))

    def read_err() -> None:
        assert proc.stderr is not None
        err_parts.append(proc.stderr.read())

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for reader in readers:
        reader.start()
    if stdin_text is not None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            proc.stdin.write(stdin_text)
        with contextlib.suppress(BrokenPipeError, OSError):
            proc.stdin.close()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for reader in readers:
        reader.join(timeout=10)
    return ProcessRun(
        None if timed_out else proc.returncode,
        "".join(out_lines),
        "".join(err_parts),
        timed_out,
        time.monotonic() - started,
    )


def _exec_with_parent_death(argv: list[str]) -> None:
    """`python -m saddler.procs CMD...`: die with the parent (PDEATHSIG survives exec), then exec CMD."""
    if not argv:
        sys.exit("usage: python -m saddler.procs COMMAND [ARGS...]")
    die_with_parent()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"saddler: cannot run {argv[0]!r}: {exc}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    _exec_with_parent_death(sys.argv[1:])

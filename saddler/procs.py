"""Processes: the one runner for external commands, process trees from /proc, subreapers, dying with a parent,
waiting for an exit without polling.

Stdlib only (`ctypes` on demand), so rollout children, the fork server and benchmark plugins may import it.
`run_process_group` is how saddler runs every external program it waits for (CLI agents, eval commands,
judges): its own session and process group, stdin closed or fed from text. The command runs under a small
supervisor (`python -m saddler.procs CMD...`, see `supervise`) that is a *child subreaper*: it inherits its
descendants' orphans (a `setsid` + double fork cannot leave its tree), and it kills that whole tree when the
command exits, on timeout, and when the process that started it dies, however it died (`kill -9` too).
"""

from __future__ import annotations

import contextlib
import os
import select
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


def _prctl(option: int, arg: int) -> bool | None:
    """`prctl(option, arg)`: whether it succeeded, or None where there is no prctl (not Linux)."""
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return None


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux >= 3.4); False where unsupported."""
    return bool(_prctl(PR_SET_CHILD_SUBREAPER, 1))


def die_with_parent() -> bool:
    """SIGKILL this process when the thread that started it exits (Linux); False where unsupported. If the
    parent is already gone (the race before the call), exit at once."""
    parent = os.getppid()
    ok = _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if ok is None:
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


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to `timeout` s for `proc` to exit; True if it did. Wakes the moment it exits (a pidfd),
    where `Popen.wait(timeout)` would poll with sleeps of up to 50 ms."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    finally:
        os.close(fd)


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


def pids_with_env(*entries: str) -> list[int]:
    """Pids of the processes whose initial environment (`/proc/<pid>/environ`) holds one of `entries`, each a whole
    `NAME=value` entry (one pass over /proc): how what escaped a process tree (`setsid`, a double fork) is found by
    the variable it was tagged with (a rollout's marker, a fleet's root)."""
    needles = [b"\0" + entry.encode() + b"\0" for entry in entries]
    found = []
    for proc in os.scandir("/proc"):
        if not proc.name.isdigit():
            continue
        try:
            with open(f"/proc/{proc.name}/environ", "rb") as fh:
                environ = b"\0" + fh.read() + b"\0"
        except OSError:
            continue
        if any(needle in environ for needle in needles):
            found.append(int(proc.name))
    return found


def read_pid(path: Path) -> int | None:
    """The pid a pid file holds; None when it is missing, unreadable or not a number."""
    try:
        text = Path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


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
    stdout line as it arrives (a log that can be followed); `on_start` the pid (the supervisor's: SIGTERM to it
    ends the command's whole tree). Nothing the command started outlives it: its tree is killed when it exits,
    on timeout (`timed_out`, `returncode` None) and when this process dies. Exit 127 = the command was not found.
    """
    started = time.monotonic()
    command = [str(a) for a in ([argv] if isinstance(argv, str) else argv)]
    if shell:
        command = ["/bin/sh", "-c", " ".join(command)]
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "saddler.procs", *command],  # the supervisor, see `supervise`
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
        stop_process_tree(proc.pid)
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


def stop_process_tree(supervisor: int, grace_s: float = 5.0) -> None:
    """End a `run_process_group` command's whole tree: SIGTERM to its supervisor (which kills every descendant,
    those in other sessions too, then exits); its process group is SIGKILLed if it has not exited in `grace_s`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(supervisor, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while is_running(supervisor) and time.monotonic() < deadline:
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(supervisor, signal.SIGKILL)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGUSR1)


def supervise(argv: list[str]) -> int:
    """`python -m saddler.procs CMD...`: run CMD as this process's child and answer for its whole tree.

    This process is a child subreaper, so every orphan of the tree is reparented here. It waits for CMD and
    then kills whatever CMD left running; on SIGTERM (a timeout or `fleet kill`), SIGHUP, SIGINT, or SIGUSR1
    (its parent-death signal: the process that started it died, even by SIGKILL) it kills the whole tree and
    exits. CMD gets SIGKILL if this process dies. Returns CMD's exit status (`-N` re-raised as signal N)."""
    if not argv:
        sys.exit("usage: python -m saddler.procs COMMAND [ARGS...]")
    parent = os.getppid()
    watched = {signal.SIGCHLD, *STOP_SIGNALS}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    become_subreaper()
    _prctl(PR_SET_PDEATHSIG, signal.SIGUSR1)  # its parent-death signal
    if os.getppid() != parent:  # the parent died before the signal was armed
        return 128 + signal.SIGUSR1
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        die_with_parent()
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            print(f"saddler: cannot run {argv[0]!r}: {exc}", file=sys.stderr)
        os._exit(127)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # the tree holds the pipes; this process keeps none of them open but stderr
    os.dup2(devnull, 1)
    status = _wait_child_or_stop(child, watched)
    kill_descendants(os.getpid())
    reap_zombies()
    if status is None:
        return 128 + signal.SIGTERM
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


def _wait_child_or_stop(child: int, watched: set[signal.Signals]) -> int | None:
    """The child's wait status, or None when a stop signal came first (orphans are reaped meanwhile)."""
    while True:
        info = signal.sigwaitinfo(watched)
        if info.si_signo != signal.SIGCHLD:
            return None
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if pid == 0:
                break
            if pid == child:
                return status


if __name__ == "__main__":
    sys.exit(supervise(sys.argv[1:]))

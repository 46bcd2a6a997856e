"""Parent side of the fork server (`saddler.executor.zygote`): start one, fork rollouts through it.

A `Zygote` is used by one thread at a time (the `IsolatedRunner` keeps a pool of idle ones). Every
process it starts carries its `marker` in its initial environment, so that a rollout's forked-only
descendants can be found and killed like the exec'd ones (which carry the rollout's own marker).

Under bubblewrap (`wrapper`) the fork server is pid 1 of its own sandbox and its rollouts write only in its
`exchange` folder. The server reports pids as its namespace sees them; `host_pid` translates them (through
`/proc/<pid>/status` NSpid), because the parent kills by host pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from saddler.errors import ExecutorError
from saddler.executor.reaper import kill_rollout
from saddler.executor.workspace import remove_tree
from saddler.procs import descendants


class ZygoteDied(ExecutorError):
    """The fork server exited or stopped answering; the caller discards it and falls back."""


def ns_pids(pid: int) -> list[int]:
    """`pid` as each pid namespace it lives in sees it, outermost first ([] when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return [int(p) for p in line.split()[1:]]
    except OSError:
        pass
    return []


def server_key(spec: str, options: dict[str, Any], env: dict[str, str]) -> tuple[str, ...]:
    """What makes two fork servers interchangeable: the benchmark, its options and the PYTHONPATH it imported under."""
    return (spec, json.dumps(options, sort_keys=True), env.get("PYTHONPATH", ""))


class Zygote:
    """One fork server for benchmark `spec` built with `options`, started with environment `env`
    (inside `wrapper`, a bubblewrap argv prefix, when given; `exchange` is then its only writable folder)."""

    def __init__(
        self, spec: str, options: dict[str, Any], env: dict[str, str], marker_var: str, cwd: str,
        wrapper: list[str] | None = None, exchange: Path | None = None,
    ) -> None:  # fmt: skip
        self.marker = uuid.uuid4().hex
        self.key = server_key(spec, options, env)
        self.exchange = exchange
        argv = [sys.executable, "-P", "-m", "saddler.executor.zygote", spec, json.dumps(options)]
        try:
            self.proc = subprocess.Popen(
                [*(wrapper or []), *argv, *(["--sandboxed"] if wrapper else [])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd,
                env={**env, marker_var: self.marker}, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise ZygoteDied(f"cannot start a fork server for {spec}: {exc}") from exc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin, self.proc.stdout.fileno()
        self._buf = b""
        self._wrapped = bool(wrapper)
        try:
            ready = self.read(60.0)
        except ZygoteDied:
            ready = None
        self.server_pid = self._find_server() if self._wrapped and ready == {"ready": True} else self.proc.pid
        if ready != {"ready": True} or not self.server_pid:
            self.discard()
            raise ZygoteDied(f"fork server for {spec} did not start (run the benchmark once with kind = spawn)")

    @property
    def pid(self) -> int:
        """The process this object started (bwrap's, when sandboxed)."""
        return self.proc.pid

    @property
    def spare(self) -> tuple[int, ...]:
        """The pids a rollout's kill must leave alive: the server and, when sandboxed, bwrap around it."""
        return tuple({self.proc.pid, self.server_pid})

    def _find_server(self) -> int:
        """The host pid of the fork server inside the sandbox: bwrap's descendant that is pid 1 of its own."""
        for pid in descendants(self.proc.pid):
            seen = ns_pids(pid)
            if len(seen) > 1 and seen[-1] == 1:
                return pid
        return 0

    def host_pid(self, pid: int) -> int | None:
        """The host pid of a rollout the server reports as `pid` (the same number when not sandboxed); None when
        a sandboxed one has already finished (a fast rollout can be done before it is looked for)."""
        if not self._wrapped:
            return pid
        for child in descendants(self.server_pid):
            seen = ns_pids(child)
            if len(seen) > 1 and seen[-1] == pid:
                return child
        return None

    def read(self, timeout: float) -> dict[str, Any] | None:
        """The next protocol message, or None when none arrives within `timeout` s; raises on EOF."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            poller = select.poll()
            poller.register(self._out, select.POLLIN | select.POLLHUP)
            if not poller.poll(left * 1000):
                return None
            chunk = os.read(self._out, 65536)
            if not chunk:
                raise ZygoteDied("fork server exited")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def fork(self, request: dict[str, Any]) -> int:
        """Start one rollout child; its pid as the server sees it (= its process group and session id)."""
        try:
            self._in.write((json.dumps(request) + "\n").encode())
            self._in.flush()
        except OSError as exc:
            raise ZygoteDied(f"fork server is gone: {exc}") from exc
        reply = self.read(30.0)
        if reply is None or "pid" not in reply:
            raise ZygoteDied(f"fork server did not start the rollout: {reply}")
        return int(reply["pid"])

    def clear_exchange(self) -> bool:
        """Empty the exchange folder after a rollout; False when something could not be removed."""
        if self.exchange is None:
            return True
        return all(remove_tree(entry) for entry in list(self.exchange.iterdir()))

    def stop(self) -> None:
        """Close the server's stdin (it exits) and make sure it is gone."""
        with contextlib.suppress(OSError):
            self._in.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def discard(self) -> None:
        """Kill the server's whole tree (what its rollouts left too), stop it, remove its exchange folder."""
        kill_rollout(self.proc.pid, self.marker, root=self.proc.pid)
        self.stop()
        if self.exchange is not None:
            remove_tree(self.exchange)

"""Parent side of the fork server (`saddler.executor.zygote`): start one, fork rollouts through it.

A `Zygote` is used by one thread at a time (the `IsolatedRunner` keeps a pool of idle ones). Every
process it starts carries its `marker` in its initial environment, so that a rollout's forked-only
descendants can be found and killed like the exec'd ones (which carry the rollout's own marker).
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
from typing import Any

from saddler.errors import ExecutorError


class ZygoteDied(ExecutorError):
    """The fork server exited or stopped answering; the caller discards it and falls back."""


class Zygote:
    """One fork server for benchmark `spec` built with `options`, started with environment `env`."""

    def __init__(self, spec: str, options: dict[str, Any], env: dict[str, str], marker_var: str, cwd: str) -> None:
        self.marker = uuid.uuid4().hex
        self.key = (spec, json.dumps(options, sort_keys=True), env.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "saddler.executor.zygote", spec, json.dumps(options)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd,
            env={**env, marker_var: self.marker}, start_new_session=True,
        )  # fmt: skip
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin, self.proc.stdout.fileno()
        self._buf = b""
        if self.read(60.0) != {"ready": True}:
            self.stop()
            raise ZygoteDied(f"fork server for {spec} did not start (run the benchmark once with kind = spawn)")

    @property
    def pid(self) -> int:
        return self.proc.pid

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
        """Start one rollout child; its pid (= its process group and session id)."""
        try:
            self._in.write((json.dumps(request) + "\n").encode())
            self._in.flush()
        except OSError as exc:
            raise ZygoteDied(f"fork server is gone: {exc}") from exc
        reply = self.read(30.0)
        if reply is None or "pid" not in reply:
            raise ZygoteDied(f"fork server did not start the rollout: {reply}")
        return int(reply["pid"])

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

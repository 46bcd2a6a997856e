"""Run one rollout in an isolated child process and turn whatever happens into a `RolloutResult`.

Each rollout gets: its own session/process group, a scrubbed environment (the allow-list only, plus a private
HOME/TMPDIR and the PYTHONPATH the child needs), a private folder (`saddler.executor.workspace`: its own copy of the
harness, its trace folder, its HOME) that is the only place it may write and that is removed afterwards, closed
stdin, an address-space limit, a wall-clock timeout, and the sandbox `executor.sandbox` resolves to
(`saddler.executor.sandbox`: bubblewrap, Landlock or none). Every process it starts carries a unique environment
marker; after the rollout ends (normally or not) the whole group and every marked process that escaped it with
`setsid` are killed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path

from saddler.benchmark import RolloutResult
from saddler.config import ExecutorConfig
from saddler.errors import ExecutorError
from saddler.executor.base import RolloutJob
from saddler.executor.child import EXIT_OOM
from saddler.executor.environment import (
    MARKER_VAR,
    home_env,
    private_base,
    private_prefix,
    scrubbed_env,
    sweep_stale_private_dirs,
)
from saddler.executor.reaper import TAIL_BYTES, kill_rollout, tail_of
from saddler.executor.sandbox import Sandbox, bwrap_argv, resolve_sandbox
from saddler.executor.workspace import HarnessCopies, RolloutFolder, remove_tree
from saddler.executor.zygote_client import Zygote, ZygoteDied, server_key
from saddler.procs import wait_exit

__all__ = ["TAIL_BYTES", "IsolatedRunner"]
_Active = tuple[int | None, tuple[str, ...], int | None, tuple[int, ...]]  # (pgid, markers, root, spared pids)


class IsolatedRunner:
    """Runs single jobs in isolated children; thread-safe; `kill_all()` stops every running child.

    `mode` "fork" (the default) forks each child from a pooled fork server that has the benchmark imported
    already (see `saddler.executor.zygote`; under bubblewrap the fork server lives inside the sandbox); "spawn"
    (or per job `job.extra["isolation"] = "spawn"`) starts a fresh interpreter (in a fresh sandbox) per rollout.
    `sandbox` is the resolved `Sandbox` (an explicitly requested one that is missing raises `ExecutorError`).
    """

    def __init__(self, config: ExecutorConfig, mode: str | None = None) -> None:
        if mode not in (None, "fork", "spawn"):
            raise ExecutorError(f"unknown isolation mode {mode!r}; use 'fork' or 'spawn'")
        self.config = config
        self.sandbox: Sandbox = resolve_sandbox(config)
        self.mode = mode or "fork"
        self._lock = threading.Lock()
        self._active: dict[str, _Active] = {}  # marker -> what kill_all needs
        self._idle: list[Zygote] = []
        self._closed = False
        self._copies = HarnessCopies()
        self._home = Path(tempfile.mkdtemp(prefix=private_prefix(), dir=private_base()))
        sweep_stale_private_dirs(private_base())
        # a runner dropped without close() (or left at exit) still stops its fork servers
        self._finalizer = weakref.finalize(self, _stop_servers, self._idle, self._home)

    def command(self, folder: RolloutFolder) -> list[str]:
        """The argv that spawns the child for the rollout in `folder` (inside bubblewrap when that is the sandbox)."""
        cmd = [sys.executable, "-P", "-m", "saddler.executor.child", str(folder.file("job.json"))]
        cmd += [str(folder.file("result.json")), "--memory-mb", str(self.config.memory_mb)]
        if self.sandbox.mode == "landlock":
            cmd += ["--landlock", str(folder.root)] + (["--network"] if self.sandbox.network else [])
        if self.sandbox.mode == "bwrap":
            return bwrap_argv(folder.root, network=self.sandbox.network, chdir=folder.home) + cmd
        return cmd

    def run(self, job: RolloutJob, cancel: threading.Event | None = None) -> RolloutResult:
        """Run `job` isolated; never raises for anything the rollout does. A set `cancel` kills it."""
        timeout = float(job.extra.get("timeout_s", self.config.timeout_s))
        marker = uuid.uuid4().hex
        env = scrubbed_env(self.config, job.benchmark, marker)
        zygote = None
        if self.mode == "fork" and job.extra.get("isolation", "fork") == "fork":
            zygote = self._take_zygote(job, env)
        base = zygote.exchange if zygote is not None and zygote.exchange else private_base()
        folder = RolloutFolder(Path(tempfile.mkdtemp(prefix=private_prefix(), dir=base)))
        healthy = True  # the fork server can serve again (False when the rollout broke it)
        try:
            folder.prepare(job, self._copies)
            env.update(home_env(str(folder.home)))
            start = time.monotonic()
            if zygote is not None:
                outcome, healthy = self._forked(zygote, env, marker, folder, timeout, cancel)
            else:
                outcome = self._spawned(env, marker, folder, timeout, cancel)
            rc, timed_out = outcome
            result = self._result(job, rc, timed_out, timeout, time.monotonic() - start, folder)
            return folder.land(result, job)
        finally:
            healthy = remove_tree(folder.root) and healthy
            if zygote is not None:
                self._give_back(zygote, healthy)

    def _markers(self, *markers: str) -> tuple[str, ...]:
        """The environment markers a rollout's processes are searched by (a scan of all /proc per kill): none under
        bubblewrap, whose pid namespace keeps every process of a rollout below the process that started it."""
        return () if self.sandbox.mode == "bwrap" else markers

    def _track(self, marker: str, entry: _Active | None) -> None:
        with self._lock:
            if entry is None:
                self._active.pop(marker, None)
            else:
                self._active[marker] = entry

    def _spawned(
        self, env: dict[str, str], marker: str, folder: RolloutFolder, timeout: float, cancel: threading.Event | None
    ) -> tuple[int | None, bool]:
        with open(folder.file("stdout.log"), "wb") as out, open(folder.file("stderr.log"), "wb") as err:
            proc = subprocess.Popen(
                self.command(folder), stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=folder.home, env=env,
                start_new_session=True,
            )  # fmt: skip
        markers = self._markers(marker)
        self._track(marker, (proc.pid, markers, proc.pid, ()))
        timed_out = False
        try:
            if cancel is not None and cancel.is_set():
                kill_rollout(proc.pid, *markers, root=proc.pid)
            timed_out = not wait_exit(proc, timeout)
        finally:
            kill_rollout(proc.pid, *markers, root=proc.pid)
            proc.wait()
            self._track(marker, None)
        return proc.returncode, timed_out

    def _forked(
        self, zygote: Zygote, env: dict[str, str], marker: str, folder: RolloutFolder, timeout: float,
        cancel: threading.Event | None,
    ) -> tuple[tuple[int | None, bool], bool]:  # fmt: skip
        """Run through a pooled fork server: ((returncode, timed out), whether the server is still healthy)."""
        request = {
            "job_file": str(folder.file("job.json")), "result_file": str(folder.file("result.json")),
            "stdout": str(folder.file("stdout.log")), "stderr": str(folder.file("stderr.log")),
            "cwd": str(folder.home), "env": env, "memory_mb": self.config.memory_mb,
            "landlock": str(folder.root) if self.sandbox.mode == "landlock" else None,
            "network": self.sandbox.network,
        }  # fmt: skip
        # While the server lives it is the subreaper of everything its rollout starts (setsid and double forks
        # included), so its tree is the whole rollout; the /proc-wide marker scan is for when it died.
        markers, spare = self._markers(marker, zygote.marker), zygote.spare
        pid: int | None = None
        try:
            pid = zygote.host_pid(zygote.fork(request))
            self._track(marker, (pid, markers, zygote.server_pid, spare))
            if cancel is not None and cancel.is_set():
                kill_rollout(pid, root=zygote.server_pid, spare=spare)
            reply = zygote.read(timeout)
            timed_out = reply is None
            if timed_out:
                kill_rollout(pid, root=zygote.server_pid, spare=spare)
                reply = zygote.read(10.0)
            kill_rollout(pid, root=zygote.server_pid, spare=spare)
            if reply is None or "exit" not in reply:
                raise ZygoteDied(f"fork server lost track of rollout {pid}")
            return (int(reply["exit"]), timed_out), True
        except ZygoteDied as exc:  # the rollout took its fork server down with it: data
            kill_rollout(pid, *markers, root=zygote.server_pid, spare=spare)
            with open(folder.file("stderr.log"), "a", encoding="utf-8") as err:
                err.write(f"[saddler] {exc}\n")
            return (-signal.SIGKILL, False), False
        finally:
            self._track(marker, None)

    def _take_zygote(self, job: RolloutJob, env: dict[str, str]) -> Zygote | None:
        """An idle fork server for the job's benchmark, or a new one; None when none can start (spawn instead)."""
        key = server_key(job.benchmark, job.benchmark_options, env)
        with self._lock:
            for i, zygote in enumerate(self._idle):
                if zygote.key == key:
                    return self._idle.pop(i)
        exchange = None
        wrapper: list[str] = []
        if self.sandbox.mode == "bwrap":
            exchange = Path(tempfile.mkdtemp(prefix=private_prefix() + "x", dir=private_base()))
            wrapper = bwrap_argv(exchange, network=self.sandbox.network, chdir=exchange, as_pid_1=True)
        home = str(exchange or self._home)
        zenv = {**env, **home_env(home)}
        try:
            return Zygote(job.benchmark, job.benchmark_options, zenv, MARKER_VAR, home, wrapper, exchange)
        except ZygoteDied:
            if exchange is not None:
                remove_tree(exchange)
            return None

    def _give_back(self, zygote: Zygote, healthy: bool) -> None:
        if healthy and zygote.exchange is not None:
            healthy = zygote.clear_exchange()
        with self._lock:
            if healthy and not self._closed:
                self._idle.append(zygote)
                return
        zygote.discard()

    def _result(
        self, job: RolloutJob, rc: int | None, timed_out: bool, timeout: float, elapsed: float, folder: RolloutFolder
    ) -> RolloutResult:
        tail = tail_of(folder.file("stderr.log"))
        if timed_out:
            return _failure(job, "timeout", elapsed, f"[saddler] timed out after {timeout:g}s\n{tail}")
        result_file = folder.file("result.json")
        if rc == 0 and result_file.is_file():
            try:
                result = RolloutResult.from_dict(json.loads(result_file.read_text(encoding="utf-8")))
            except (ValueError, TypeError) as exc:
                return _failure(job, "infra_error", elapsed, f"[saddler] unreadable result: {exc}\n{tail}")
            if not result.duration_s:
                result.duration_s = elapsed
            return result
        if rc == EXIT_OOM:
            why = f"out of memory (limit {self.config.memory_mb} MiB)"
        elif rc is not None and rc < 0:
            why = f"killed by signal {signal.Signals(-rc).name}"
        elif rc == 0:
            why = "exited without writing a result"
        else:
            why = f"exit code {rc}"
        return _failure(job, "infra_error", elapsed, f"[saddler] rollout process {why}\n{tail}")

    def kill_all(self) -> None:
        """Kill every rollout still running (used when the caller is interrupted)."""
        with self._lock:
            active = list(self._active.values())
        for pgid, markers, root, spare in active:
            kill_rollout(pgid, *markers, root=root, spare=spare)

    def close(self) -> None:
        """Kill running rollouts, stop the idle fork servers, remove their home."""
        self.kill_all()
        with self._lock:
            self._closed = True
        self._finalizer()


def _stop_servers(idle: list[Zygote], home: Path) -> None:
    while idle:
        idle.pop().discard()
    remove_tree(home)


def _failure(job: RolloutJob, disposition: str, elapsed: float, tail: str) -> RolloutResult:
    return RolloutResult(
        task_id=job.task.id, score=0.0, passed=False, disposition=disposition,
        duration_s=elapsed, error_tail=keep_marker(tail),
    )  # fmt: skip


def keep_marker(text: str, limit: int = TAIL_BYTES) -> str:
    """`text` cut to `limit` characters: its first line (saddler's own `[saddler] …` marker) kept whole, then as
    much of the end of the rest (the rollout's last output) as fits."""
    if len(text) <= limit:
        return text
    head, _, rest = text.partition("\n")
    head = head[: limit // 2]
    return f"{head}\n…{rest[-(limit - len(head) - 2) :]}"

"""Run one rollout in an isolated child process and turn whatever happens into a `RolloutResult`.

Each rollout gets: its own session/process group, a scrubbed environment (the allow-list only, plus a
private HOME/TMPDIR and the PYTHONPATH the child needs), a private temporary directory as cwd, closed
stdin, an address-space limit, a wall-clock timeout, and optionally a bubblewrap sandbox (no network, a
read-only view of everything but its private dir and trace dir). Every process it starts carries a unique
environment marker; after the rollout ends (normally or not) the whole group and every marked process
that escaped it with `setsid` are killed.
"""

from __future__ import annotations

import json
import shutil
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
    bwrap_prefix,
    check_sandbox,
    private_base,
    private_prefix,
    scrubbed_env,
    sweep_stale_private_dirs,
)
from saddler.executor.reaper import TAIL_BYTES, kill_rollout, tail_of, wait_exit
from saddler.executor.zygote_client import Zygote, ZygoteDied

__all__ = ["TAIL_BYTES", "IsolatedRunner"]


class IsolatedRunner:
    """Runs single jobs in isolated children; thread-safe; `kill_all()` stops every running child.

    `mode` "fork" (the default without a sandbox) forks each child from a pooled fork server that has the
    benchmark imported already (see `saddler.executor.zygote`); "spawn" (always under bwrap, or per job
    with `job.extra["isolation"] = "spawn"`) starts a fresh interpreter per rollout.
    """

    def __init__(self, config: ExecutorConfig, mode: str | None = None) -> None:
        check_sandbox(config)
        if mode not in (None, "fork", "spawn"):
            raise ExecutorError(f"unknown isolation mode {mode!r}; use 'fork' or 'spawn'")
        self.config = config
        self.mode = "spawn" if config.sandbox != "none" else (mode or "fork")
        self._lock = threading.Lock()
        self._active: dict[str, tuple[int, tuple[str, ...], int | None]] = {}  # marker -> (pgid, markers, server)
        self._idle: list[Zygote] = []
        self._closed = False
        self._home = Path(tempfile.mkdtemp(prefix=private_prefix(), dir=private_base()))
        sweep_stale_private_dirs(private_base())
        # a runner dropped without close() (or left at exit) still stops its fork servers
        self._finalizer = weakref.finalize(self, _stop_servers, self._idle, self._home)

    def command(self, job_file: Path, result_file: Path, job: RolloutJob, private_dir: Path) -> list[str]:
        """The argv that spawns the child (wrapped in bubblewrap when configured)."""
        cmd = [sys.executable, "-P", "-m", "saddler.executor.child", str(job_file), str(result_file)]
        cmd += ["--memory-mb", str(self.config.memory_mb)]
        if self.config.sandbox == "bwrap":
            return bwrap_prefix(private_dir, Path(job.trace_dir), Path(job.harness_dir)) + cmd
        return cmd

    def run(self, job: RolloutJob, cancel: threading.Event | None = None) -> RolloutResult:
        """Run `job` isolated; never raises for anything the rollout does. A set `cancel` kills it."""
        timeout = float(job.extra.get("timeout_s", self.config.timeout_s))
        marker = uuid.uuid4().hex
        private_dir = Path(tempfile.mkdtemp(prefix=private_prefix(), dir=private_base()))
        try:
            Path(job.trace_dir).mkdir(parents=True, exist_ok=True)
            files = {name: private_dir / name for name in ("job.json", "result.json", "stdout.log", "stderr.log")}
            files["job.json"].write_text(job.to_json(), encoding="utf-8")
            work = private_dir / "tmp"
            work.mkdir()
            env = scrubbed_env(self.config, job.benchmark, work, marker)
            start = time.monotonic()
            outcome = None
            if self.mode == "fork" and job.extra.get("isolation", "fork") == "fork":
                outcome = self._forked(job, env, marker, files, work, timeout, cancel)
            if outcome is None:
                outcome = self._spawned(job, env, marker, files, work, private_dir, timeout, cancel)
            rc, timed_out = outcome
            elapsed = time.monotonic() - start
            return self._result(job, rc, timed_out, timeout, elapsed, files["result.json"], files["stderr.log"])
        finally:
            shutil.rmtree(private_dir, ignore_errors=True)

    def _track(self, marker: str, entry: tuple[int, tuple[str, ...], int | None] | None) -> None:
        with self._lock:
            if entry is None:
                self._active.pop(marker, None)
            else:
                self._active[marker] = entry

    def _spawned(
        self, job: RolloutJob, env: dict[str, str], marker: str, files: dict[str, Path], work: Path,
        private_dir: Path, timeout: float, cancel: threading.Event | None,
    ) -> tuple[int | None, bool]:  # fmt: skip
        with open(files["stdout.log"], "wb") as out, open(files["stderr.log"], "wb") as err:
            proc = subprocess.Popen(
                self.command(files["job.json"], files["result.json"], job, private_dir),
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=work, env=env, start_new_session=True,
            )  # fmt: skip
        self._track(marker, (proc.pid, (marker,), None))
        timed_out = False
        try:
            if cancel is not None and cancel.is_set():
                kill_rollout(proc.pid, marker, root=proc.pid)
            timed_out = not wait_exit(proc, timeout)
        finally:
            kill_rollout(proc.pid, marker, root=proc.pid)
            proc.wait()
            self._track(marker, None)
        return proc.returncode, timed_out

    def _forked(
        self, job: RolloutJob, env: dict[str, str], marker: str, files: dict[str, Path], work: Path,
        timeout: float, cancel: threading.Event | None,
    ) -> tuple[int | None, bool] | None:  # fmt: skip
        """Run through a pooled fork server; None when no fork server can start (the caller spawns)."""
        try:
            zygote = self._take_zygote(job, env)
        except ZygoteDied:
            return None
        request = {
            "job_file": str(files["job.json"]), "result_file": str(files["result.json"]),
            "stdout": str(files["stdout.log"]), "stderr": str(files["stderr.log"]), "cwd": str(work),
            "env": env, "memory_mb": self.config.memory_mb,
        }  # fmt: skip
        healthy, pid = False, 0
        try:
            pid = zygote.fork(request)
            self._track(marker, (pid, (marker, zygote.marker), zygote.pid))
            if cancel is not None and cancel.is_set():
                kill_rollout(pid, marker, zygote.marker, root=zygote.pid, spare=zygote.pid)
            reply = zygote.read(timeout)
            timed_out = reply is None
            if timed_out:
                kill_rollout(pid, marker, zygote.marker, root=zygote.pid, spare=zygote.pid)
                reply = zygote.read(10.0)
            kill_rollout(pid, marker, zygote.marker, root=zygote.pid, spare=zygote.pid)
            if reply is None or "exit" not in reply:
                raise ZygoteDied(f"fork server lost track of rollout {pid}")
            healthy = True
            return int(reply["exit"]), timed_out
        except ZygoteDied as exc:  # the rollout took its fork server down with it: data
            if pid:
                kill_rollout(pid, marker, zygote.marker, root=zygote.pid, spare=zygote.pid)
            with open(files["stderr.log"], "a", encoding="utf-8") as err:
                err.write(f"[saddler] {exc}\n")
            return -signal.SIGKILL, False
        finally:
            self._track(marker, None)
            self._give_back(zygote, healthy)

    def _take_zygote(self, job: RolloutJob, env: dict[str, str]) -> Zygote:
        zenv = {**env, "HOME": str(self._home), "TMPDIR": str(self._home), "TMP": str(self._home)}
        zenv["TEMP"] = str(self._home)
        key = (job.benchmark, json.dumps(job.benchmark_options, sort_keys=True), zenv.get("PYTHONPATH", ""))
        with self._lock:
            for i, zygote in enumerate(self._idle):
                if zygote.key == key:
                    return self._idle.pop(i)
        return Zygote(job.benchmark, job.benchmark_options, zenv, MARKER_VAR, str(self._home))

    def _give_back(self, zygote: Zygote, healthy: bool) -> None:
        with self._lock:
            if healthy and not self._closed:
                self._idle.append(zygote)
                return
        kill_rollout(zygote.pid, zygote.marker, root=zygote.pid)  # its tree first, then the server itself
        zygote.stop()

    def _result(
        self, job: RolloutJob, rc: int | None, timed_out: bool, timeout: float, elapsed: float, result_file: Path,
        stderr: Path,
    ) -> RolloutResult:  # fmt: skip
        tail = tail_of(stderr)
        if timed_out:
            return _failure(job, "timeout", elapsed, f"[saddler] timed out after {timeout:g}s\n{tail}")
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
        for pgid, markers, root in active:
            kill_rollout(pgid, *markers, root=root if root is not None else pgid, spare=root)

    def close(self) -> None:
        """Kill running rollouts, stop the idle fork servers, remove their home."""
        self.kill_all()
        with self._lock:
            self._closed = True
        self._finalizer()


def _stop_servers(idle: list[Zygote], home: Path) -> None:
    while idle:
        zygote = idle.pop()
        kill_rollout(zygote.pid, zygote.marker, root=zygote.pid)
        zygote.stop()
    shutil.rmtree(home, ignore_errors=True)


def _failure(job: RolloutJob, disposition: str, elapsed: float, tail: str) -> RolloutResult:
    return RolloutResult(
        task_id=job.task.id, score=0.0, passed=False, disposition=disposition,
        duration_s=elapsed, error_tail=tail[-TAIL_BYTES:],
    )  # fmt: skip

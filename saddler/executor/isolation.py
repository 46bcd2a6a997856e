"""Run one rollout in an isolated child process and turn whatever happens into a `RolloutResult`.

Each rollout gets: its own session/process group, a scrubbed environment (the allow-list only, plus a
private HOME/TMPDIR and the PYTHONPATH the child needs), a private temporary directory as cwd, closed
stdin, an address-space limit, a wall-clock timeout, and optionally a bubblewrap sandbox (no network, a
read-only view of everything but its private dir and trace dir). Every process it starts carries a unique
environment marker; after the rollout ends (normally or not) the whole group and every marked process
that escaped it with `setsid` are killed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from saddler.benchmark import RolloutResult
from saddler.config import ExecutorConfig
from saddler.errors import ExecutorError
from saddler.executor.base import RolloutJob
from saddler.executor.child import EXIT_OOM

MARKER_VAR = "SADDLER_ROLLOUT_MARKER"
TAIL_BYTES = 2048
BWRAP_MISSING = (
    "sandbox 'bwrap' requested but bubblewrap is not installed; apt-get install bubblewrap, "
    'or set executor.sandbox = "none"'
)


def check_sandbox(config: ExecutorConfig) -> None:
    """Raise `ExecutorError` when the configured sandbox cannot be used on this machine."""
    if config.sandbox == "bwrap" and shutil.which("bwrap") is None:
        raise ExecutorError(BWRAP_MISSING)


def _package_root(module: str) -> str | None:
    """The sys.path entry a top-level package is imported from, found without importing it."""
    top = module.split(".", 1)[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return str(Path(next(iter(spec.submodule_search_locations))).parent)
    return str(Path(spec.origin).parent) if spec.origin else None


def child_pythonpath(benchmark: str, inherited: str | None) -> str:
    """PYTHONPATH for the child: where saddler and the benchmark's package live (works from a source
    checkout as well as an install), then the inherited value when the allow-list passes it."""
    from saddler.benchmark import BENCHMARKS

    module = benchmark.partition(":")[0] if ":" in benchmark else BENCHMARKS.get(benchmark, "").partition(":")[0]
    entries = [_package_root("saddler"), _package_root(module) if module else None]
    if inherited:
        entries.extend(inherited.split(os.pathsep))
    seen: list[str] = []
    for entry in entries:
        if entry and entry not in seen:
            seen.append(entry)
    return os.pathsep.join(seen)


def scrubbed_env(config: ExecutorConfig, benchmark: str, private_dir: Path, marker: str) -> dict[str, str]:
    """The child's whole environment: allow-listed names only, private HOME/TMPDIR, marker, PYTHONPATH."""
    env = {name: os.environ[name] for name in config.env_allow if name in os.environ}
    env.setdefault("PATH", os.defpath)
    private = str(private_dir)
    env.update(HOME=private, TMPDIR=private, TMP=private, TEMP=private)
    env["PYTHONPATH"] = child_pythonpath(benchmark, env.get("PYTHONPATH"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env[MARKER_VAR] = marker
    return env


def marked_pids(marker: str) -> list[int]:
    """Pids of live processes whose initial environment carries `marker`."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                if needle in fh.read():
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_rollout(pgid: int, marker: str, rounds: int = 20) -> None:
    """SIGKILL the process group and every marked process, repeating until no marked process is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for _ in range(rounds):
        pids = marked_pids(marker)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _tail(path: Path, limit: int = TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _bwrap_prefix(private_dir: Path, trace_dir: Path, harness_dir: Path) -> list[str]:
    return [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        "--bind", str(private_dir), str(private_dir),
        "--bind", str(trace_dir), str(trace_dir),
        "--ro-bind", str(harness_dir), str(harness_dir),
        "--unshare-net", "--unshare-pid", "--die-with-parent", "--chdir", str(private_dir), "--",
    ]  # fmt: skip


class IsolatedRunner:
    """Runs single jobs in isolated children; thread-safe; `kill_all()` stops every running child."""

    def __init__(self, config: ExecutorConfig) -> None:
        check_sandbox(config)
        self.config = config
        self._lock = threading.Lock()
        self._active: dict[str, int] = {}  # marker -> pgid

    def command(self, job_file: Path, result_file: Path, job: RolloutJob, private_dir: Path) -> list[str]:
        """The argv that runs the child (wrapped in bubblewrap when configured)."""
        cmd = [sys.executable, "-P", "-m", "saddler.executor.child", str(job_file), str(result_file)]
        cmd += ["--memory-mb", str(self.config.memory_mb)]
        if self.config.sandbox == "bwrap":
            return _bwrap_prefix(private_dir, Path(job.trace_dir), Path(job.harness_dir)) + cmd
        return cmd

    def run(self, job: RolloutJob, cancel: threading.Event | None = None) -> RolloutResult:
        """Run `job` isolated; never raises for anything the rollout does. A set `cancel` kills it."""
        timeout = float(job.extra.get("timeout_s", self.config.timeout_s))
        marker = uuid.uuid4().hex
        private_dir = Path(tempfile.mkdtemp(prefix="saddler-rollout-"))
        try:
            Path(job.trace_dir).mkdir(parents=True, exist_ok=True)
            job_file, result_file = private_dir / "job.json", private_dir / "result.json"
            job_file.write_text(job.to_json(), encoding="utf-8")
            work = private_dir / "tmp"
            work.mkdir()
            stdout_path, stderr_path = private_dir / "stdout.log", private_dir / "stderr.log"
            start = time.monotonic()
            with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
                proc = subprocess.Popen(
                    self.command(job_file, result_file, job, private_dir),
                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=work,
                    env=scrubbed_env(self.config, job.benchmark, work, marker), start_new_session=True,
                )  # fmt: skip
            with self._lock:
                self._active[marker] = proc.pid
            timed_out = False
            try:
                if cancel is not None and cancel.is_set():
                    kill_rollout(proc.pid, marker)
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                kill_rollout(proc.pid, marker)
                proc.wait()
                with self._lock:
                    self._active.pop(marker, None)
            elapsed = time.monotonic() - start
            return self._result(job, proc.returncode, timed_out, timeout, elapsed, result_file, stderr_path)
        finally:
            shutil.rmtree(private_dir, ignore_errors=True)

    def _result(
        self, job: RolloutJob, rc: int, timed_out: bool, timeout: float, elapsed: float, result_file: Path, stderr: Path
    ) -> RolloutResult:
        tail = _tail(stderr)
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
        elif rc < 0:
            why = f"killed by signal {signal.Signals(-rc).name}"
        elif rc == 0:
            why = "exited without writing a result"
        else:
            why = f"exit code {rc}"
        return _failure(job, "infra_error", elapsed, f"[saddler] rollout process {why}\n{tail}")

    def kill_all(self) -> None:
        """Kill every rollout still running (used when the caller is interrupted)."""
        with self._lock:
            active = dict(self._active)
        for marker, pgid in active.items():
            kill_rollout(pgid, marker)


def _failure(job: RolloutJob, disposition: str, elapsed: float, tail: str) -> RolloutResult:
    return RolloutResult(
        task_id=job.task.id, score=0.0, passed=False, disposition=disposition,
        duration_s=elapsed, error_tail=tail[-TAIL_BYTES:],
    )  # fmt: skip

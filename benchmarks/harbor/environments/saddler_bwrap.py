"""A Harbor environment that runs a trial's commands in bubblewrap instead of a container (no Docker needed).

Use it with `harbor run -e saddler_bwrap:BwrapEnvironment` (this folder on PYTHONPATH), or `env = "bwrap"` in
saddler's `harbor` benchmark, which does both. It needs only `bwrap` (apt-get install bubblewrap) and imports
nothing of saddler, so Harbor's own Python (>= 3.12) loads it.

What a trial sees: the host's file system read-only (the task's Dockerfile is NOT built: the task must run with
the host's tools), a private writable `/app` (the working directory, or `[environment].workdir`), `/tests`,
`/solution`, `/tmp`, `/root` and `/logs` (which Harbor copies into the trial folder afterwards, as it does from a
container). Each command runs in new user, pid, IPC and UTS namespaces, and without network unless the task's
network policy is public (`network_mode = "public"`). The writable folders live in a private temporary folder
removed when the environment stops. This is a stand-in for a container on machines without Docker, for tasks
that need nothing the host lacks; it is not a security boundary against the host's readable files.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import NetworkMode

_PRIVATE = ("app", "tests", "solution", "tmp", "root", "logs", "runtime", "installed-agent")
_HOST_SKIPPED = {"proc", "dev", "tmp", "sys", "app", "tests", "solution", "logs", "root", "runtime", "installed-agent"}


class BwrapEnvironment(BaseEnvironment):
    """One trial's sandbox: bubblewrap per command over a private writable tree (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="harbor-bwrap-"))
        super().__init__(*args, **kwargs)
        self._workdir = PurePosixPath(self.task_env_config.workdir or "/app")

    @staticmethod
    def type() -> str:
        return "saddler-bwrap"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True)  # not mounted: Harbor downloads /logs afterwards

    def _validate_definition(self) -> None:
        if shutil.which("bwrap") is None:
            raise FileNotFoundError("bwrap (bubblewrap) is not on PATH: apt-get install bubblewrap")

    # the sandbox's file system ---------------------------------------------------------------------------------

    def _binds(self) -> list[tuple[PurePosixPath, Path]]:
        """(sandbox path, host path) of every writable folder, longest sandbox path first."""
        binds = [(PurePosixPath("/" + name), self._root / name) for name in _PRIVATE]
        if not self._workdir.is_relative_to("/app"):
            binds.append((self._workdir, self._root / "workdir"))
        return sorted(binds, key=lambda b: len(b[0].parts), reverse=True)

    def host_path(self, path: str) -> Path:
        """Where sandbox path `path` lives on the host (it must be inside a writable folder)."""
        target = PurePosixPath(path if path.startswith("/") else str(self._workdir / path))
        for inside, host in self._binds():
            if target == inside or target.is_relative_to(inside):
                return host.joinpath(*target.relative_to(inside).parts)
        raise PermissionError(f"{path}: only {', '.join(str(b[0]) for b in self._binds())} are writable here")

    def _argv(self, command: str, cwd: str | None, env: dict[str, str]) -> list[str]:
        argv = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
        if self.network_policy.network_mode != NetworkMode.PUBLIC:
            argv.append("--unshare-net")
        for entry in sorted(os.listdir("/")):
            if entry not in _HOST_SKIPPED:
                argv += ["--ro-bind-try" if not os.path.islink("/" + entry) else "--symlink", *self._host_entry(entry)]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        for inside, host in sorted(self._binds(), key=lambda b: len(b[0].parts)):
            host.mkdir(parents=True, exist_ok=True)
            argv += ["--bind", str(host), str(inside)]
        argv += ["--chdir", cwd or str(self._workdir), "--clearenv"]
        base = {"PATH": os.environ.get("PATH", os.defpath), "HOME": "/root", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
        for key, value in {**base, **env}.items():
            argv += ["--setenv", key, value]
        return [*argv, "bash", "-c", command]

    @staticmethod
    def _host_entry(entry: str) -> list[str]:
        path = "/" + entry
        return [os.readlink(path), path] if os.path.islink(path) else [path, path]

    # the BaseEnvironment contract ------------------------------------------------------------------------------

    async def start(self, force_build: bool) -> None:
        for _inside, host in self._binds():
            host.mkdir(parents=True, exist_ok=True)
        for name in ("agent", "verifier", "artifacts"):
            (self._root / "logs" / name).mkdir(parents=True, exist_ok=True)
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        shutil.rmtree(self._root, ignore_errors=True)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self.host_path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self.host_path(target_dir), dirs_exist_ok=True, symlinks=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.host_path(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        source = self.host_path(source_dir)
        if source.resolve() != Path(target_dir).resolve():
            shutil.copytree(source, target_dir, dirs_exist_ok=True, symlinks=True)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        argv = self._argv(command, cwd, self._merge_env(env) or {})
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=timeout_sec)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds") from None  # as Docker's says
        except asyncio.CancelledError:  # the agent's timeout: Harbor cancels the task
            _kill_group(proc.pid)
            await proc.wait()
            raise
        text, errors = out.decode(errors="replace"), err.decode(errors="replace")
        return ExecResult(stdout=text, stderr=errors, return_code=proc.returncode)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)

"""Which sandbox rollouts run in, what it contains, and what it does not.

`executor.sandbox` asks for one of:
- `auto` (default): the strongest this machine has: `bwrap`, else `landlock`, else `none`.
- `bwrap`: bubblewrap. The rollouts of one worker share a fork server inside one sandbox (own pid, network, IPC,
  UTS and user namespaces, no capabilities, the whole filesystem read-only but that worker's exchange folder);
  each rollout writes only its private folder there, which is emptied before the next one, and the SysV IPC
  objects it leaves are removed. Nothing of the optimizer is visible; no network (unless `executor.network`).
- `landlock`: the rollout confines itself with Landlock (see `saddler.executor.landlock`).
- `none`: process isolation only.
Every mode gives each rollout its own copy of the harness, a scrubbed environment and a private HOME/TMPDIR, and
lands its traces in the run folder itself, so no rollout ever shares a writable file with another.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from saddler.config import ExecutorConfig
from saddler.errors import ExecutorError
from saddler.executor import landlock

PROC_ENVIRON = "other processes' environment (/proc/<pid>/environ: the optimizer's secrets)"
NETWORK = "the network (a rollout can reach local and remote listeners)"
WRITES = "writes outside the rollout's private folder ($HOME, the run folder, evodag.sqlite)"
SIGNALS = "signals to other processes (the optimizer)"
SYSV_IPC = "SysV IPC objects (shared memory, queues, semaphores) a rollout leaves for the next"
BWRAP_HINT = "install bubblewrap (apt-get install bubblewrap) to contain all of it"


@dataclass(frozen=True)
class Sandbox:
    """The effective sandbox: `mode` (bwrap | landlock | none), why it was chosen, what it leaves open."""

    mode: str
    requested: str
    network: bool
    reason: str = ""
    landlock_abi: int = 0

    def uncontained(self) -> list[str]:
        """What a hostile rollout can still reach, in the words the warning uses (empty: contained)."""
        if self.mode == "bwrap":
            return [NETWORK + " (executor.network = true)"] if self.network else []
        if self.mode == "landlock":
            left = []
            if self.network:
                left.append(NETWORK + " (executor.network = true)")
            elif self.landlock_abi < 4:
                left.append(NETWORK + f" (Landlock ABI {self.landlock_abi} < 4 cannot refuse TCP)")
            else:
                left.append("UDP, raw and Unix-socket networking (Landlock refuses TCP only)")
            if self.landlock_abi < 6:
                left.append(SIGNALS + f" (Landlock ABI {self.landlock_abi} < 6)")
            return [*left, SYSV_IPC]
        return [PROC_ENVIRON, NETWORK, WRITES, SIGNALS, SYSV_IPC]

    def describe(self) -> str:
        """One line: the mode, how it was chosen, and what it leaves open."""
        chosen = self.mode if self.requested == self.mode else f"{self.requested} -> {self.mode}"
        text = f"sandbox {chosen}" + (f" ({self.reason})" if self.reason else "")
        left = self.uncontained()
        return text + (f"; not contained: {'; '.join(left)}" if left else "; rollouts are contained")

    def warning(self) -> str | None:
        """The start-up warning when the sandbox is weaker than bubblewrap (None under bubblewrap, where only
        what `executor.network` opens on purpose is left)."""
        if self.mode == "bwrap":
            return None
        return f"rollouts are not fully isolated: {self.describe()}; {BWRAP_HINT}"


@functools.lru_cache(maxsize=1)
def bwrap_status() -> tuple[bool, str]:
    """(usable, why not): bubblewrap is on PATH and can make the namespaces rollouts need (user namespaces can be
    disabled, e.g. by AppArmor or in containers). Probed once per process."""
    path = shutil.which("bwrap")
    if path is None:
        return False, "bubblewrap is not installed"
    probe = [path, *_namespaces(network=False), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap cannot run: {exc}"
    if proc.returncode != 0:
        return False, f"bwrap cannot make a sandbox here: {proc.stderr.strip()[-300:] or f'exit {proc.returncode}'}"
    return True, ""


def resolve_sandbox(config: ExecutorConfig) -> Sandbox:
    """The sandbox `config` gets on this machine; raises `ExecutorError` when an explicitly requested one is missing."""
    requested, network = config.sandbox, config.network
    abi = landlock.abi_version()
    if requested in ("auto", "bwrap"):
        usable, why = bwrap_status()
        if usable:
            return Sandbox("bwrap", requested, network, landlock_abi=abi)
        if requested == "bwrap":
            raise ExecutorError(f"sandbox 'bwrap' requested but {why}; apt-get install bubblewrap, or set "
                                'executor.sandbox = "auto" to use the strongest sandbox available')  # fmt: skip
        if abi >= 1:
            return Sandbox("landlock", requested, network, f"{why}; Landlock ABI {abi}", abi)
        return Sandbox("none", requested, network, f"{why}; no Landlock on this kernel")
    if requested == "landlock":
        if abi < 1:
            raise ExecutorError("sandbox 'landlock' requested but this kernel has no Landlock (Linux >= 5.13 with "
                                'landlock enabled); set executor.sandbox = "auto"')  # fmt: skip
        return Sandbox("landlock", requested, network, landlock_abi=abi)
    return Sandbox("none", requested, network, "asked for", abi)


def _namespaces(network: bool) -> list[str]:
    args = ["--unshare-all", "--cap-drop", "ALL"]
    return [*args, "--share-net"] if network else args


def bwrap_argv(writable: Path, *, network: bool, chdir: Path, as_pid_1: bool = False) -> list[str]:
    """bubblewrap argv prefix: fresh namespaces, no capabilities, `/` read-only, a fresh read-only /dev and /proc,
    `writable` the only writable folder."""
    path = shutil.which("bwrap") or "bwrap"
    argv = [path, *_namespaces(network), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += ["--bind", str(writable), str(writable), "--remount-ro", "/dev", "--chdir", str(chdir)]
    if as_pid_1:
        argv.append("--as-pid-1")
    else:
        argv.append("--die-with-parent")
    return [*argv, "--"]

"""Confining a CLI agent that has no sandbox of its own (pi) with bubblewrap.

The agent sees the whole filesystem read-only, a private empty /tmp, and writable only the paths it is given
(the candidate worktree during diagnosis, nothing otherwise). The run folder is sealed: an empty folder in its
place shows only the parts a session may read, so the full EvoDAG and the held-out traces do not exist for the
agent. The network stays (it calls its model's API). Its own process tree lives in a new PID namespace and dies
with bwrap, which dies with saddler's process group.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

BWRAP = "bwrap"


def bwrap_argv(
    argv: Sequence[str],
    *,
    writable: Sequence[Path],
    readable: Sequence[Path],
    cwd: Path,
    sealed: Path | None = None,
    visible: Sequence[Path] = (),
    bwrap: str = BWRAP,
) -> list[str]:
    """`argv` wrapped in bubblewrap: `/` read-only, private /tmp, `readable` re-exposed read-only (they may lie
    under /tmp), the folder `sealed` replaced by an empty one showing only its `visible` paths (read-only, those
    that exist), `writable` bound read-write, working directory `cwd`."""
    wrapped = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in readable:
        wrapped += ["--ro-bind", str(path), str(path)]
    if sealed is not None:
        wrapped += ["--tmpfs", str(sealed)]
        for path in visible:
            if path.exists():
                wrapped += ["--ro-bind", str(path), str(path)]
    for path in writable:
        wrapped += ["--bind", str(path), str(path)]
    wrapped += ["--unshare-pid", "--die-with-parent", "--chdir", str(cwd), "--", *argv]
    return wrapped


@functools.lru_cache(maxsize=8)
def bwrap_works(which: Callable[[str], str | None] = shutil.which, timeout_s: float = 10.0) -> tuple[bool, str]:
    """Whether bubblewrap is installed and can create its namespaces here (containers may forbid it), with
    what was found: `(True, "bubblewrap 0.8.0")` or `(False, why)`. Probed once per process (every confined
    session asks)."""
    path = which(BWRAP)
    if path is None:
        return False, "bwrap not found on PATH (install bubblewrap)"
    probe = [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--", "true"]
    try:
        ran = subprocess.run(probe, capture_output=True, text=True, timeout=timeout_s, check=False)
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{path} cannot run: {exc}"
    if ran.returncode != 0:
        return False, f"{path} cannot create a sandbox here: {ran.stderr.strip()[-200:]}"
    return True, version.stdout.strip() or path

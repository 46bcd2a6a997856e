"""A fork server for rollouts: one pre-imported process per worker that forks one child per rollout.

Starting Python and importing the benchmark costs far more than an opsdesk rollout. A zygote is started
once (scrubbed environment, its own session) with the benchmark imported and built; for each rollout it
forks a child that takes the same isolation as a spawned one before running anything: a new session,
stdin from /dev/null, stdout/stderr to files, cwd and HOME/TMPDIR in the private dir, the rollout's
environment, the address-space limit. The zygote itself never runs a rollout, so every child starts from
the same pristine state. Protocol on the zygote's stdin/stdout, one JSON object per line:
request `{"job_file", "result_file", "stdout", "stderr", "cwd", "env", "memory_mb", "landlock", "network"}`
-> `{"pid": n}`, then `{"exit": returncode}` (negative = killed by that signal, as with `Popen.returncode`).
`landlock` (a folder, or null) confines the child with Landlock to writing that folder only.

Server side (`python -m saddler.executor.zygote SPEC OPTIONS_JSON [--sandboxed]`) is import-light like the child.
`--sandboxed` says it runs alone in a bubblewrap sandbox (own IPC namespace): after each rollout it removes the
SysV IPC objects the rollout left, so the next rollout finds none.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import pkgutil
import select
import sys
import tempfile
import traceback
from typing import Any

from saddler.procs import become_subreaper, kill_descendants, reap_zombies


def _serve_one(bench: Any, req: dict[str, Any], proto_out: int, sandboxed: bool) -> None:
    reap_zombies()  # orphans of the previous rollout, killed by the parent since
    pid = os.fork()
    if pid == 0:
        os.close(proto_out)
        _child(bench, req)  # never returns
    os.write(proto_out, (json.dumps({"pid": pid}) + "\n").encode())
    _await_child_or_orphaning(pid)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if sandboxed:
        remove_sysv_ipc()
    os.write(proto_out, (json.dumps({"exit": code}) + "\n").encode())


def remove_sysv_ipc() -> int:
    """Remove every SysV shared memory segment, message queue and semaphore set this IPC namespace holds (only
    ever called alone in a sandbox's own namespace); how many were removed."""
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    removers = {
        "shm": lambda i: libc.shmctl(i, ipc_rmid, None),
        "msg": lambda i: libc.msgctl(i, ipc_rmid, None),
        "sem": lambda i: libc.semctl(i, 0, ipc_rmid),
    }
    removed = 0
    for kind, remove in removers.items():
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="ascii") as fh:
                ids = [int(line.split()[1]) for line in fh.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        removed += sum(1 for i in ids if remove(i) == 0)
    return removed


def _await_child_or_orphaning(pid: int) -> None:
    """Block until the rollout child exits. The parent sends nothing while a rollout runs, so stdin turning
    readable means it is gone (killed): then kill the rollout's whole tree and exit, leaving nothing behind."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(0, select.POLLIN | select.POLLHUP)
    try:
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if pidfd in ready:
                return
            if 0 in ready:
                kill_descendants(os.getpid())
                os._exit(0)
    finally:
        os.close(pidfd)


def _child(bench: Any, req: dict[str, Any]) -> None:
    code = 1
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, fd)
        os.closerange(3, 256)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None
        if req.get("landlock"):
            from saddler.executor import landlock

            landlock.confine(req["landlock"], network=bool(req.get("network")))
        from saddler.executor import child

        if req.get("memory_mb"):
            child.set_memory_limit(int(req["memory_mb"]))
        with open(req["job_file"], encoding="utf-8") as fh:
            job = json.load(fh)
        try:
            result = child.run_job(job, bench)
        except MemoryError:
            sys.stderr.write(f"MemoryError: the rollout exceeded the executor memory limit ({req['memory_mb']} MiB)\n")
            code = child.EXIT_OOM
        else:
            tmp = req["result_file"] + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(result.to_dict()))
            os.replace(tmp, req["result_file"])
            code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        kill_descendants(os.getpid())
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def warm(bench: Any) -> None:
    """Do in the zygote what every child would otherwise repeat: import the benchmark's own package
    (its lazily imported submodules too), build its task lists, and call its optional `warm()`. Only
    benchmark code runs here, never harness code."""
    package = type(bench).__module__.rpartition(".")[0] or type(bench).__module__
    module = sys.modules.get(package)
    if module is not None and hasattr(module, "__path__"):
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            with contextlib.suppress(Exception):
                importlib.import_module(info.name)
    for split in ("train", "dev", "test"):
        with contextlib.suppress(Exception):
            bench.tasks(split)
    hook = getattr(bench, "warm", None)
    if callable(hook):
        with contextlib.suppress(Exception):
            hook()


def main(argv: list[str]) -> int:
    from saddler.benchmark import load_benchmark

    spec, options = argv[0], json.loads(argv[1])
    sandboxed = "--sandboxed" in argv[2:]
    proto_out = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray prints must not corrupt the protocol
    become_subreaper()  # a rollout's orphans stay in this tree, where the parent finds and kills them
    bench = load_benchmark(spec, options)
    warm(bench)
    gc.freeze()  # children share these pages copy-on-write; keep the collector from touching them
    os.write(proto_out, b'{"ready": true}\n')
    for line in sys.stdin:
        if line.strip():
            _serve_one(bench, json.loads(line), proto_out, sandboxed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

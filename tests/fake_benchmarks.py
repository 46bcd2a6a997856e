"""Tiny benchmarks for the executor tests; importable by rollout children (put `tests/` on PYTHONPATH).

`FakeBenchmark` is deterministic: a task's score depends on the harness's `policy.txt`, the task id and the seed.
Task ids choose a behaviour: `ok-*` (graded), `crash-*` (raises), `exit-*` (hard exit 7), `oom-*` (allocates 4 GiB),
`sleep-*` (sleeps forever), `chatty-*` (10 kB on stderr, then sleeps forever), `daemon-*` (leaves a setsid process
behind, then grades normally), `ghost-*` (leaves an orphan with an empty environment in its own session; `*-hang`
then hangs), `barrier-*` (waits until N rollouts have started), `patricide-*` (kills its fork server, then hangs),
`hostile-*` (everything a bad rollout can do; its prompt is JSON with `outside`, a path to write to, and `token`,
digits naming its `sleep` children), `attack-*` (tries each escape of issue 12.5 and reports what worked in
`attack.json` among its traces; prompt JSON: `secret`, `port`, `optimizer_pid`, `write` paths), `leave-*` (leaves
marks wherever it can write) and `look-*` (reports in `look.json` which marks of a previous rollout it sees; both
take the prompt JSON `token`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from saddler.benchmark import BankPatch, RolloutResult, Symptom, Task

SPEC = "fake_benchmarks:FakeBenchmark"


class FakeBenchmark:
    name = "fake"

    def __init__(self, n_tasks: int = 6, work_ms: float = 0.0, version: str = "1") -> None:
        self.n_tasks = n_tasks
        self.work_ms = work_ms
        self.version = version

    def tasks(self, split: str) -> list[Task]:
        return [Task(id=f"ok-{split}-{i}", group=f"g{i % 3}", split=split) for i in range(self.n_tasks)]

    def fingerprint(self) -> str:
        return f"fake-{self.version}"

    def model_fingerprint(self) -> str:
        return "fake-model"

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        return []

    def patch_bank(self) -> list[BankPatch]:
        return []

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        kind = task.id.split("-", 1)[0]
        if kind == "crash":
            raise RuntimeError("harness blew up on purpose")
        if kind == "exit":
            sys.stderr.write("about to hard-exit\n")
            sys.stderr.flush()
            os._exit(7)
        if kind == "oom":
            blob = bytearray(4 << 30)
            return RolloutResult(task.id, 1.0, True, "success", rationale=str(len(blob)))
        if kind == "patricide":  # kills the fork server it was forked from (never anything else), then hangs
            parent = os.getppid()
            if b"saddler.executor.zygote" in Path(f"/proc/{parent}/cmdline").read_bytes():
                os.kill(parent, 9)
            time.sleep(10_000)
        if kind == "sleep":
            time.sleep(10_000)
        if kind == "chatty":  # a page of an unrelated logging warning, then hangs (as a model call without network)
            sys.stderr.write("WARNING inspect_ai: an unrelated logging warning\n" * 200 + "last line before the hang\n")
            sys.stderr.flush()
            time.sleep(10_000)
        if kind == "barrier":  # passes only if `parties` rollouts (prompt JSON: dir, parties) run at the same time
            spec = json.loads(task.prompt)
            Path(spec["dir"], task.id).touch()
            while len(list(Path(spec["dir"]).iterdir())) < spec["parties"]:
                time.sleep(0.01)
            return RolloutResult(task.id, 1.0, True, "success")
        if kind == "hostile":
            _hostile(task, trace_dir)
        if kind == "attack":
            _attack(task, trace_dir)
        if kind in ("leave", "look"):
            _marks(kind, task, harness_dir, trace_dir)
        if kind == "ghost":  # no marker, own session, orphaned: only the process tree can find it
            script = f"sleep 10000 & echo $! > {task.id}.pid"
            ghost = subprocess.Popen(["setsid", "-w", "sh", "-c", script], env={}, cwd=trace_dir)
            ghost.wait()
            if task.id.endswith("-hang"):
                time.sleep(10_000)
        if kind == "daemon":
            leftover = subprocess.Popen(["sleep", "10000"], start_new_session=True)
            (trace_dir / f"{task.id}.pid").write_text(str(leftover.pid))
        if self.work_ms:
            end = time.perf_counter() + self.work_ms / 1000
            while time.perf_counter() < end:
                pass
        policy = (harness_dir / "policy.txt").read_text(encoding="utf-8")
        digest = hashlib.sha256(f"{policy}|{task.id}|{seed}".encode()).digest()
        score = round(digest[0] / 255, 4)
        passed = score >= 0.5
        trace = trace_dir / f"{task.id}-s{seed}.json"
        trace.write_text(json.dumps({"task": task.id, "seed": seed, "score": score, "policy": policy}))
        return RolloutResult(
            task_id=task.id,
            score=score,
            passed=passed,
            disposition="success" if passed else "task_failure",
            trace_path=str(trace),
            rationale="" if passed else "score below 0.5",
        )


def _hostile(task: Task, trace_dir: Path) -> None:
    """Print the environment, escape the process group, grab 4 GiB, write outside, then hang."""
    env_dump = "\n".join(f"{k}={v}" for k, v in sorted(os.environ.items()))
    print(env_dump, flush=True)
    sys.stderr.write(env_dump + "\n")
    sys.stderr.flush()
    (trace_dir / "env.txt").write_text(env_dump)
    spec = json.loads(task.prompt)
    escaped = subprocess.Popen(["sleep", f"1{spec['token']}"], start_new_session=True)
    via_setsid = subprocess.Popen(["setsid", "sleep", f"2{spec['token']}"])
    forked = os.fork()
    if forked == 0:  # a forked-only escapee: no exec, its own session
        os.setsid()
        time.sleep(10_000)
        os._exit(0)
    pids = [os.getpid(), escaped.pid, via_setsid.pid, forked]
    (trace_dir / "pids.txt").write_text("\n".join(map(str, pids)))
    try:
        blob = bytearray(4 << 30)
        (trace_dir / "alloc.txt").write_text(f"allocated {len(blob)}")
    except MemoryError:
        (trace_dir / "alloc.txt").write_text("MemoryError")
    outside = Path(spec["outside"])
    try:
        outside.write_text("escaped")
        (trace_dir / "outside.txt").write_text("written")
    except OSError as exc:
        (trace_dir / "outside.txt").write_text(f"refused: {exc}")
    time.sleep(10_000)


class ListedFailuresBenchmark:
    """Every task passes unless the harness's `failing.txt` lists it (`<task id> <check>` per line): then it
    fails that check, with the failure point in `failing.txt`. Deterministic, no bank: offline diagnosis
    never finds a patch, so the loop's own decisions (sampling, saturated batches) are what a test sees."""

    name = "listed-failures"

    def __init__(self, n_tasks: int = 6) -> None:
        self.n_tasks = n_tasks

    def tasks(self, split: str) -> list[Task]:
        return [Task(id=f"t-{split}-{i}", group=f"{split}{i % 2}", split=split) for i in range(self.n_tasks)]

    def fingerprint(self) -> str:
        return f"listed-failures-{self.n_tasks}"

    def model_fingerprint(self) -> str:
        return "listed-failures-model"

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        return []

    def patch_bank(self) -> list[BankPatch]:
        return []

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        listed = {}
        for line in (harness_dir / "failing.txt").read_text().splitlines():
            task_id, _, check = line.partition(" ")
            if task_id:
                listed[task_id] = check.strip() or "failed"
        if task.id in listed:
            return RolloutResult(task.id, 0.0, False, "task_failure", rationale=f"{listed[task.id]}: listed",
                                 failure_file="failing.txt")  # fmt: skip
        return RolloutResult(task.id, 1.0, True, "success")


def _attack(task: Task, trace_dir: Path) -> None:
    """Try every escape a rollout was seen to make and write what happened to `attack.json`."""
    import socket

    spec = json.loads(task.prompt)
    report: dict[str, object] = {}
    holders = []
    try:
        pids = {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}
    except OSError:  # /proc cannot be listed: try the pids a rollout can still know
        pids = set()
    pids |= {os.getppid(), spec["optimizer_pid"]}
    for pid in pids:  # the optimizer's secret, in any process's initial environment
        try:
            if spec["secret"].encode() in Path(f"/proc/{pid}/environ").read_bytes():
                holders.append(pid)
        except OSError:
            continue
    report["environ"] = "found" if holders else "not found"
    try:
        socket.create_connection(("127.0.0.1", spec["port"]), timeout=3).close()
        report["tcp"] = "connected"
    except OSError as exc:
        report["tcp"] = f"refused: {exc}"
    writes = {}
    for path in spec["write"]:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("planted by a rollout")
            writes[path] = "written"
        except OSError as exc:
            writes[path] = f"refused: {exc.strerror}"
    report["writes"] = writes
    try:
        os.kill(spec["optimizer_pid"], 0)
        report["signal"] = "sent"
    except OSError as exc:
        report["signal"] = f"refused: {exc.strerror}"
    (trace_dir / "attack.json").write_text(json.dumps(report))


def _mark_places(harness_dir: Path, token: str) -> dict[str, Path]:
    return {
        "harness": harness_dir / f"mark-{token}",
        "home": Path(os.environ.get("HOME", "/nonexistent")) / f"mark-{token}",
        "cwd": Path.cwd() / f"mark-{token}",
        "tmp": Path("/tmp") / f"saddler-mark-{token}",
        "shm": Path("/dev/shm") / f"saddler-mark-{token}",
    }


def sysv_key(token: str) -> int:
    """The SysV IPC key a `leave-*` rollout with `token` uses for its shared memory segment."""
    return int(token) % (2**31 - 1) or 1


def _marks(kind: str, task: Task, harness_dir: Path, trace_dir: Path) -> None:
    """`leave`: write a mark in every place a rollout may think is its own; `look`: report which marks exist."""
    token = json.loads(task.prompt)["token"]
    places = _mark_places(harness_dir, token)
    if kind == "leave":
        left = {}
        for name, path in places.items():
            try:
                path.write_text("left by an earlier rollout")
                left[name] = "written"
            except OSError as exc:
                left[name] = f"refused: {exc.strerror}"
        shm = _libc().shmget(sysv_key(token), 4096, 0o1000 | 0o600)  # IPC_CREAT
        left["sysv"] = "written" if shm >= 0 else "refused"
        (trace_dir / "leave.json").write_text(json.dumps(left))
    else:
        seen = {name: path.exists() for name, path in places.items()}
        seen["sysv"] = _libc().shmget(sysv_key(token), 0, 0) >= 0
        (trace_dir / "look.json").write_text(json.dumps(seen))


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)

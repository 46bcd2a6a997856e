"""Fixtures for tests that run the fake `claude`, `codex` and `pi` CLIs (tests/fake_clis) as real processes.

Run folders live outside /tmp on purpose: codex's workspace-write sandbox lets an agent write under /tmp, so a
run folder there hides exactly the bug where its result file lay outside the sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import socketserver
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from saddler.config import SessionConfig
from saddler.sessions.command import CommandBackend

FAKES = Path(__file__).resolve().parents[1] / "fake_clis"
RUNS = Path(__file__).resolve().parents[2] / ".test-runs"
# where the run folders go when the checkout itself lies under /tmp (a fresh clone in `mktemp -d`)
ELSEWHERE = (Path.home() / ".cache" / "saddler-test-runs", Path("/var/tmp/saddler-test-runs"))
KEYS = {"ANTHROPIC_API_KEY": "sk-ant-fake", "OPENAI_API_KEY": "sk-fake"}


@pytest.fixture
def outside() -> Iterator[Path]:
    """A fresh folder outside /tmp (under the repository's `.test-runs/`, or, for a checkout under /tmp, the
    user's cache folder or /var/tmp), removed afterwards."""
    path = _outside_tmp() / uuid.uuid4().hex[:12]
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _outside_tmp() -> Path:
    for base in (RUNS, *ELSEWHERE):
        if str(base.resolve()).startswith("/tmp/"):
            continue
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        return base
    pytest.fail(f"no writable folder outside /tmp among {RUNS}, {', '.join(map(str, ELSEWHERE))}")


def install_fakes(bin_dir: Path) -> None:
    """`claude`, `codex` and `pi` executables in `bin_dir` running the fakes with this Python. The fakes (and the
    real CLIs' recordings they print from) are copied beside them: a confined agent sees its executable's folder,
    but not a checkout under /tmp."""
    fakes = bin_dir / "fake_clis"
    shutil.copytree(FAKES, fakes, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    shutil.copy2(FAKES.parent / "fake_agent.py", bin_dir)  # what fake_clis/brain.py imports from its parent
    shutil.copytree(FAKES.parent / "fixtures" / "real_clis", fakes / "recordings", dirs_exist_ok=True)
    for name in ("claude", "codex", "pi"):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {sys.executable} {fakes / (name + ".py")} "$@"\n', encoding="utf-8")
        script.chmod(0o755)


class _Collector(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, record: Path) -> None:
        self.record = record
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Append)


class _Append(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        data = self.rfile.read()
        server = self.server
        assert isinstance(server, _Collector)
        with server.lock, server.record.open("ab") as fh:
            fh.write(data)
        self.wfile.write(b"ok\n")


@pytest.fixture
def fakes(outside: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fake CLIs first on PATH, API keys set, and the record file their runs end up in (returned). They
    report over a localhost socket, so a CLI confined to a read-only filesystem still reports."""
    install_fakes(outside / "bin")
    monkeypatch.setenv("PATH", f"{outside / 'bin'}{os.pathsep}{os.environ['PATH']}")
    for key, value in KEYS.items():
        monkeypatch.setenv(key, value)
    for knob in ("FAKE_CLI_ESCAPE", "FAKE_CLI_BASH", "FAKE_CLI_MODE"):
        monkeypatch.delenv(knob, raising=False)
    record = outside / "record.jsonl"
    collector = _Collector(record)
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    host, port = collector.server_address[:2]
    monkeypatch.setenv("FAKE_CLI_RECORD", f"tcp://{host}:{port}")
    yield record
    collector.shutdown()
    collector.server_close()


@pytest.fixture(scope="session")
def records() -> Callable[[Path], list[dict[str, Any]]]:
    """`records(path)`: the JSON lines the fake CLIs reported (the `fakes` record file); [] before any."""

    def read(path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.is_file() else []

    return read


@pytest.fixture(scope="session")
def command_backend() -> Callable[..., CommandBackend]:
    """`command_backend(run_dir, command, **session_config)`: the command backend with `command` (a preset or a
    template), no retries and no sleeping between attempts."""

    def make(run_dir: Path, command: str, **config: Any) -> CommandBackend:
        cfg = SessionConfig(backend="command", command=command, retries=0, **config)
        return CommandBackend(cfg, benchmark=None, run_dir=run_dir, seed=0, sleep=lambda s: None)

    return make

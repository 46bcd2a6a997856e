"""Backends registered by short name and imported lazily."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from saddler.errors import UnknownNameError

if TYPE_CHECKING:
    from saddler.benchmark import Benchmark
    from saddler.config import SessionConfig
    from saddler.ports import SessionBackend

BACKENDS: dict[str, str] = {
    "offline": "saddler.sessions.offline:OfflineBackend",
    "claude": "saddler.sessions.claude:ClaudeBackend",
    "command": "saddler.sessions.command:CommandBackend",
}


def load_backend(config: SessionConfig, *, benchmark: Benchmark, run_dir: Path, seed: int) -> SessionBackend:
    """Build the backend named `config.backend`.

    Every backend constructor takes `(config, *, benchmark, run_dir, seed)`.
    """
    if config.backend not in BACKENDS:
        raise UnknownNameError("backend", config.backend, list(BACKENDS))
    module_name, _, attr = BACKENDS[config.backend].partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    backend: SessionBackend = cls(config, benchmark=benchmark, run_dir=run_dir, seed=seed)
    return backend

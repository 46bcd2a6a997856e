"""Fixtures for the fleet-mode tests: the fixture project, a fake `claude` on PATH, the seed's fleet.json."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FLEET = Path(__file__).resolve().parents[1] / "fixtures" / "fleet"


@pytest.fixture
def fleet_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """`fleet_setup(base=tmp_path, **changes)`: copy tests/fixtures/fleet/project to base/my-project, put the fake
    agent first on PATH as `claude` (base/bin), and write base/fleet.json (the seed's example with the workdir
    pointed at the copy; `changes` = {"section.key": value}, None removes the key); returns the fleet.json path."""

    def setup(base: Path | None = None, **changes: Any) -> Path:
        base = tmp_path if base is None else base
        shutil.copytree(FLEET / "project", base / "my-project")
        bindir = base / "bin"
        bindir.mkdir()
        shutil.copyfile(FLEET / "fake_fleet_agent.py", bindir / "claude")
        (bindir / "claude").chmod(0o755)
        monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
        data = json.loads((FLEET / "fleet.json").read_text(encoding="utf-8"))
        data["problem"]["workdir"] = str(base / "my-project")
        for key, value in changes.items():
            section, _, name = key.partition(".")
            if value is None:
                data[section].pop(name, None)
            else:
                data[section][name] = value
        path = base / "fleet.json"
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        return path

    return setup

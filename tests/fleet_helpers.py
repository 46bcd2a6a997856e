"""Shared builders for the fleet-mode tests: the fixture project, a fake `claude` on PATH, the seed's fleet.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "fleet"


def fleet_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **changes: Any) -> Path:
    """Copy the project to tmp_path/my-project, install the fake agent as `claude`, write tmp_path/fleet.json
    (the seed's example with the workdir pointed at the copy; `changes` = {"section.key": value})."""
    shutil.copytree(FIXTURE / "project", tmp_path / "my-project")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copyfile(FIXTURE / "fake_fleet_agent.py", bindir / "claude")
    (bindir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    data = json.loads((FIXTURE / "fleet.json").read_text(encoding="utf-8"))
    data["problem"]["workdir"] = str(tmp_path / "my-project")
    for key, value in changes.items():
        section, _, name = key.partition(".")
        if value is None:
            data[section].pop(name, None)
        else:
            data[section][name] = value
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path

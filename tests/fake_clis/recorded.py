"""The real CLIs' recorded behaviour (tests/fixtures/real_clis, written by tests/record_real_clis.py), for the
stand-ins to print what the real CLI printed. `tests/plugins/clis.install_fakes` copies the recordings beside the
stand-ins (`recordings/`): a stand-in confined by bubblewrap may not see a checkout under /tmp."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
FOLDER = _HERE / "recordings" if (_HERE / "recordings").is_dir() else _HERE.parent / "fixtures" / "real_clis"


def load(name: str) -> dict[str, Any]:
    """The recording `name` (`codex-429`): argv, returncode, stdout, stderr, ..."""
    return json.loads((FOLDER / f"{name}.json").read_text(encoding="utf-8"))


def events(name: str) -> list[dict[str, Any]]:
    """The JSON lines of a recording's stdout."""
    return [json.loads(line) for line in load(name)["stdout"].splitlines() if line.startswith("{")]


def replay(name: str, replace: dict[str, str] | None = None) -> int:
    """Print the recording's stdout and stderr (with `replace`'s substitutions); returns its exit code."""
    data = load(name)
    out, err = data["stdout"], data["stderr"]
    for old, new in (replace or {}).items():
        out, err = out.replace(old, new), err.replace(old, new)
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.stderr.write(err)
    return int(data["returncode"])

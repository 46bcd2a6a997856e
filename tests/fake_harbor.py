#!/usr/bin/env python3
"""A stand-in for `harbor run`, written from recorded real behaviour: it replays the trials Harbor 0.26.0 wrote
(tests/fixtures/harbor/recorded/<case>/) for every task (`-i`) × agent (the `-c` config's `agents`) of the job,
each trial's result.json given that task's name and that agent's env, as a real job would have them.

`FAKE_HARBOR_CASE` names the recorded case (`no_docker`: print what Harbor printed and exit as it did, making no
job folder); `FAKE_HARBOR_LIMIT=N` writes only the first N trials, then exits 1 (a job killed half-way);
`FAKE_HARBOR_RECORD` is the JSON file the call (argv, cwd, environment) is recorded to.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

RECORDED = Path(__file__).with_name("fixtures") / "harbor" / "recorded"


def _option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def main(argv: list[str]) -> int:
    record = os.environ.get("FAKE_HARBOR_RECORD")
    if record:
        Path(record).write_text(json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}))
    case = os.environ.get("FAKE_HARBOR_CASE", "passed")
    meta = json.loads((RECORDED / f"{case}.json").read_text())
    if not (RECORDED / case).is_dir():
        sys.stdout.write(meta["stdout"])
        sys.stderr.write(meta["stderr"])
        return int(meta["returncode"])
    agents = json.loads(Path(_option(argv, "-c")).read_text())["agents"]
    tasks = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-i"]
    job = Path(_option(argv, "--jobs-dir")) / _option(argv, "--job-name")
    recorded = next(p.parent for p in (RECORDED / case).glob("*/result.json"))
    limit = int(os.environ.get("FAKE_HARBOR_LIMIT", "-1"))
    written = 0
    for task in tasks:
        for agent in agents:
            if written == limit:
                return 1
            trial = job / f"{task}__fake{written}"
            shutil.copytree(recorded, trial)
            data = json.loads((trial / "result.json").read_text())
            data["task_name"], data["trial_name"] = task, trial.name
            data["config"]["agent"]["env"] = agent["env"]
            (trial / "result.json").write_text(json.dumps(data, indent=4))
            written += 1
    sys.stdout.write(meta["stdout"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

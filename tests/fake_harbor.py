#!/usr/bin/env python3
"""A stand-in for the `harbor` CLI: replays a recorded job folder (tests/fixtures/harbor/<case>) as `harbor run`
would leave it, after recording its argv, working directory and PYTHONPATH.

`FAKE_HARBOR_CASE` names the case (`no_result`: print an error and exit 1 without writing anything);
`FAKE_HARBOR_RECORD` is the JSON file the call is recorded to.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

FIXTURES = Path(__file__).with_name("fixtures") / "harbor"


def main(argv: list[str]) -> int:
    record = os.environ.get("FAKE_HARBOR_RECORD")
    if record:
        Path(record).write_text(
            json.dumps({"argv": argv, "cwd": os.getcwd(), "pythonpath": os.environ.get("PYTHONPATH", "")})
        )
    case = os.environ.get("FAKE_HARBOR_CASE", "passed")
    if case == "no_result":
        print("Error: Docker is not running. Start Docker and try again.", file=sys.stderr)
        return 1
    jobs = Path(argv[argv.index("--jobs-dir") + 1])
    name = argv[argv.index("--job-name") + 1]
    shutil.copytree(FIXTURES / case / "saddler", jobs / name)
    harness = next(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    for path in (jobs / name).rglob("*.json"):
        path.write_text(path.read_text().replace("{JOBS}", str(jobs)).replace("{HARNESS}", harness))
    print(f"Results written to {jobs / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

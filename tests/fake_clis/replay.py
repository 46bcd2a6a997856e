#!/usr/bin/env python3
"""A stand-in that prints what a real CLI printed: `$FAKE_CLI_REPLAY` names a recording in
tests/fixtures/real_clis (`pi-429`), whose stdout, stderr and exit code this process reproduces; each run also
appends a line to `$FAKE_CLI_REPLAY_COUNT` when set (how many times saddler ran the CLI)."""

import json
import os
import sys
from pathlib import Path

recording = Path(__file__).resolve().parents[1] / "fixtures" / "real_clis" / f"{os.environ['FAKE_CLI_REPLAY']}.json"
data = json.loads(recording.read_text(encoding="utf-8"))
if os.environ.get("FAKE_CLI_REPLAY_COUNT"):
    with open(os.environ["FAKE_CLI_REPLAY_COUNT"], "a", encoding="utf-8") as fh:
        fh.write(" ".join(sys.argv[1:3]) + "\n")
sys.stdout.write(data["stdout"])
sys.stderr.write(data["stderr"])
sys.exit(data["returncode"])

#!/usr/bin/env bash
# Set-up + the main job: optimize the bundled opsdesk harness with the offline backend.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SADDLER_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q .
RUN_DIR=${1:-demo-run}
"$VENV/bin/saddler" init "$RUN_DIR" --template opsdesk --force
"$VENV/bin/saddler" run "$RUN_DIR"

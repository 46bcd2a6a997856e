#!/usr/bin/env bash
# Full set-up + every check on a fresh machine: a fresh venv, a non-editable install with the dev, ray, inspect,
# bench, docs and browser extras, smoke checks of the installed console scripts, ruff (lint + format), mypy, the
# import layer contracts, the documentation site (mkdocs, warnings as errors), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SADDLER_TEST_VENV:-.venv-test}
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac  # absolute: PATH below must find its console scripts
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then "$PY" -m venv "$VENV"; fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps .
"$VENV/bin/python" -m pip install -q ".[dev,ray,inspect,bench,docs,browser]"
export PATH="$VENV/bin:$PATH"
# The installed (non-editable) package must find its bundled benchmarks and templates.
( cd /tmp && saddler --help >/dev/null && evo-dag --help >/dev/null && saddler list --json )
ruff check saddler evodag benchmarks tests bench
ruff format --check saddler evodag benchmarks tests bench
mypy
mypy bench/*.py   # the bench scripts: not a package, checked as files (their imports of one another resolve beside them)
lint-imports   # the layer contracts in pyproject.toml [tool.importlinter]
# The docs site (mkdocs.yml, docs/ into site/): any warning fails; offline (no fonts or plugins fetched). The
# variable silences Material's end-of-life banner, which is not about this site.
NO_MKDOCS_2_WARNING=1 mkdocs build --strict   # not --quiet: it hides the warnings strict mode counts (exit 0)
# Rollouts run in bubblewrap when it is there (executor.sandbox = "auto"): install it where we can (root with
# apt-get; quiet, best effort). Without it the bwrap tests skip and the Landlock / no-sandbox fallbacks are tested.
if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq bubblewrap || { apt-get update -qq && apt-get install -y -qq bubblewrap; }; } >/dev/null 2>&1 \
    || echo "note: bubblewrap could not be installed; the bwrap tests will be skipped" >&2
fi
# The dashboard's real-browser tests (tests/e2e/test_ui_browser.py) drive Debian's chromium through chromium-driver:
# installed the same way (best effort; without them those tests skip).
if ! command -v chromedriver >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq chromium chromium-driver || { apt-get update -qq && apt-get install -y -qq chromium chromium-driver; }; } \
    >/dev/null 2>&1 || echo "note: chromium could not be installed; the browser tests will be skipped" >&2
fi
# Real Harbor (it needs Python >= 3.12) for the Harbor adapter's end-to-end tests, in its own venv, pinned to the
# version tests/fixtures/harbor/recorded was recorded with. Best effort: without a Python 3.12 those tests skip.
if [ -z "${SADDLER_TEST_HARBOR:-}" ]; then
  HARBOR_VENV="$PWD/.venv-harbor"
  PY312=${PYTHON312:-}
  if [ -z "$PY312" ]; then  # the first Python 3.12 that runs (a pyenv shim on PATH may name one it cannot start)
    for candidate in "$(command -v python3.12 || true)" "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
      if [ -n "$candidate" ] && "$candidate" -c 'import sys' >/dev/null 2>&1; then PY312=$candidate; break; fi
    done
  fi
  if [ ! -x "$HARBOR_VENV/bin/harbor" ] && [ -n "$PY312" ]; then
    { "$PY312" -m venv "$HARBOR_VENV" && "$HARBOR_VENV/bin/python" -m pip install -q 'harbor==0.26.0'; } >/dev/null 2>&1 \
      || echo "note: Harbor could not be installed with $PY312; the real-Harbor tests will be skipped" >&2
  fi
  if [ -x "$HARBOR_VENV/bin/harbor" ]; then export SADDLER_TEST_HARBOR="$HARBOR_VENV/bin/harbor"; fi
fi
# Exit 5 (no tests collected) is non-zero: set -e makes it fail the run. Two pytest-xdist workers, one per core of
# the CI machine (the whole suite: 576 s against 764 s in one process on 2 cores); SADDLER_TEST_WORKERS=0 runs it in
# one process.
python -m pytest -n "${SADDLER_TEST_WORKERS:-2}" "$@"

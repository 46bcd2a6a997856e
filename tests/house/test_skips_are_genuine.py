"""A skip is only for something genuinely absent on this machine (an optional extra, a tool, a kernel feature,
a live API key), never for a bundled benchmark or template that failed to load: that must fail loudly. Every
skip in the tests is listed here with why it is genuine; a new one fails this test until it is reviewed."""

from __future__ import annotations

import ast
from pathlib import Path

from repo_paths import TESTS

GENUINE: dict[tuple[str, str], str] = {
    # (file, the skip's reason as written, or the module importorskip takes) -> why it is genuine
    ("conftest.py", "'live test: pass --run-live to call a real API'"): "live tests spend money: opt-in",
    ("conftest.py", "f\"live test: set {' or '.join(keys)}\""): "no API key for a live test",
    ("conftest.py", "'real-CLI tier: pass --run-real-clis (installs the CLIs with npm)'"): (
        "the real-CLI tier installs three CLIs from npm and runs them: opt-in"
    ),
    ("plugins/executors.py", "reason"): "the sandbox mode's tool is absent (bwrap not installed, no Landlock)",
    ("e2e/test_executor_ray.py", "ray"): "the optional `ray` extra is not installed (a broken install fails)",
    (
        "bench/test_gepa_strategy.py",
        "gepa",
    ): "the optional `bench` extra (gepa) is not installed (a broken install fails)",
    (
        "benchmarks/test_inspect_benchmark.py",
        "\"needs inspect-ai: pip install 'saddler[inspect]' (scripts/test.sh installs it)\"",
    ): ("the optional `inspect` extra is not installed (found by find_spec; a broken install fails)"),
    (
        "benchmarks/test_harbor_benchmark.py",
        "'needs a Harbor install (SADDLER_TEST_HARBOR or .venv-harbor: Python 3.12) and bwrap'",
    ): "no Python 3.12 with Harbor here (scripts/test.sh installs it where it finds a Python 3.12), or no bwrap",
    ("run/test_disk_full.py", "'needs unshare with user and mount namespaces'"): "a kernel or container without userns",
    ("cli/test_cli_errors.py", "'needs /dev/full'"): "a system without /dev/full",
    (
        "sessions/test_presets.py",
        "f'pi runs confined and bubblewrap cannot run here: {BWRAP_WHY}'",
    ): "bubblewrap absent",
    ("sessions/test_presets.py", "f'bubblewrap cannot run here: {BWRAP_WHY}'"): "bubblewrap absent",
    ("run/test_heldout_sealed.py", "f'bubblewrap cannot run here: {why}'"): "bubblewrap absent",
    ("sessions/test_presets_recorded.py", "f'pi runs confined and bubblewrap cannot run here: {BWRAP_WHY}'"): (
        "bubblewrap absent"
    ),
    ("sessions/test_confined_installs.py", "f'bubblewrap cannot run here: {BWRAP_WHY}'"): "bubblewrap absent",
    ("test_doctor_backends.py", "'bubblewrap cannot run here'"): "bubblewrap absent",
    ("live/test_live_presets.py", "f'the {name} CLI is not on PATH'"): "a live test's agent CLI is not installed",
    ("live/test_live_presets.py", "'pi runs confined: needs bubblewrap'"): "bubblewrap absent",
    ("e2e/test_ui_browser.py", "selenium.webdriver"): "the optional `browser` extra (selenium) is not installed",
    (
        "e2e/test_ui_browser.py",
        "NO_BROWSER",
    ): "Debian's chromium or chromium-driver is absent (apt-get failed or no root)",
}


def _skips(path: Path) -> list[tuple[str, str]]:
    """(kind, reason source) of every skip, skipif, importorskip and xfail in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        kind = name.rsplit(".", 1)[-1]
        if kind not in ("skip", "skipif", "importorskip", "xfail") or not name.startswith("pytest."):
            continue
        reason = next((k.value for k in node.keywords if k.arg == "reason"), None)
        if kind == "importorskip":
            found.append((kind, ast.unparse(node.args[0]).strip("'\"")))
            exc = next((ast.unparse(k.value) for k in node.keywords if k.arg == "exc_type"), "")
            assert exc == "ModuleNotFoundError", f"{path.name}: importorskip must skip only a missing module"
        else:
            arg = reason or (node.args[0] if node.args and kind in ("skip", "xfail") else None)
            found.append((kind, ast.unparse(arg) if arg is not None else ""))
    return found


def test_every_skip_is_for_something_genuinely_absent() -> None:
    seen = {}
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel.startswith("fixtures/"):
            continue
        for kind, reason in _skips(path):
            assert kind != "xfail", f"{rel}: no xfail: a test passes or fails"
            seen[(rel, reason)] = kind
    unreviewed = sorted(set(seen) - set(GENUINE))
    assert unreviewed == [], "a new skip: is what it needs genuinely absent? then add it to GENUINE, with why"
    assert sorted(set(GENUINE) - set(seen)) == []  # the list is not stale


def test_the_scan_sees_every_kind_of_skip(tmp_path: Path) -> None:
    sample = tmp_path / "test_x.py"
    sample.write_text(
        "import pytest\n"
        "m = pytest.importorskip('ray', exc_type=ModuleNotFoundError)\n"
        "@pytest.mark.skipif(True, reason='why')\n"
        "def test_a():\n"
        "    pytest.skip('opsdesk did not load')\n",
        encoding="utf-8",
    )
    assert _skips(sample) == [("importorskip", "ray"), ("skipif", "'why'"), ("skip", "'opsdesk did not load'")]

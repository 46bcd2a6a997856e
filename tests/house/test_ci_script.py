"""CI cannot pass silently: `.ci/run` runs `scripts/test.sh`, which stops at the first failing check (a
formatting difference included) and passes pytest's exit status on, "no tests collected" (5) included.

The script runs for real against a stand-in venv whose tools (python, ruff, mypy, …) log their arguments and exit
with the status a test asks for, so nothing is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPO

TOOLS = ("python", "saddler", "evo-dag", "ruff", "mypy", "lint-imports", "mkdocs", "bwrap", "chromedriver")
CHECKED = "saddler evodag benchmarks tests bench"
BENCH_FILES = " ".join(sorted(f"bench/{f.name}" for f in (REPO / "bench").glob("*.py")))  # mypy checks them as files
FAKE = """#!/bin/sh
echo "$(basename "$0") $*" >> "$CI_LOG"
case "$(basename "$0") $*" in
  $FAIL_WHEN) exit "$FAIL_WITH" ;;
esac
exit 0
"""


@pytest.fixture
def fake_venv(tmp_path: Path) -> Path:
    """A venv folder (absolute path) whose bin/ holds logging stand-ins for every tool test.sh calls."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in TOOLS:
        (bin_dir / tool).write_text(FAKE, encoding="utf-8")
        (bin_dir / tool).chmod(0o755)
    return tmp_path / "venv"


def run_ci(entry: str, venv: Path, fail_when: str = "", fail_with: int = 1) -> tuple[int, list[str]]:
    log = venv / "calls.log"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(venv),
        "SADDLER_TEST_VENV": str(venv),
        "SADDLER_TEST_HARBOR": "none",  # not the real Harbor install step
        "CI_LOG": str(log),
        "FAIL_WHEN": fail_when or "never-matches",
        "FAIL_WITH": str(fail_with),
    }
    proc = subprocess.run(["bash", entry], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return proc.returncode, [line.rstrip() for line in lines]


def test_every_check_runs_in_order_and_a_clean_run_passes(fake_venv: Path) -> None:
    code, calls = run_ci("scripts/test.sh", fake_venv)
    assert code == 0
    assert calls == [
        "python -m pip install -q --upgrade pip",
        "python -m pip install -q --force-reinstall --no-deps .",
        "python -m pip install -q .[dev,ray,inspect,bench,docs,browser]",
        "saddler --help",
        "evo-dag --help",
        "saddler list --json",
        f"ruff check {CHECKED}",
        f"ruff format --check {CHECKED}",
        "mypy",
        f"mypy {BENCH_FILES}",
        "lint-imports",
        "mkdocs build --strict",
        "python -m pytest -n 2",
    ]


@pytest.mark.parametrize(
    ("fail_when", "last_call"),
    [
        ("ruff format*", f"ruff format --check {CHECKED}"),
        ("ruff check*", f"ruff check {CHECKED}"),
        ("mypy ", "mypy"),  # the packages (no argument: the call logs a trailing space)
        ("mypy bench*", f"mypy {BENCH_FILES}"),
        ("lint-imports*", "lint-imports"),
        ("mkdocs*", "mkdocs build --strict"),
    ],
)
def test_a_failing_check_fails_ci_before_pytest(fake_venv: Path, fail_when: str, last_call: str) -> None:
    code, calls = run_ci(".ci/run", fake_venv, fail_when=fail_when)
    assert code == 1
    assert calls[-1] == last_call


@pytest.mark.parametrize("status", [1, 2, 5])
def test_pytest_failures_and_no_tests_collected_fail_ci(fake_venv: Path, status: int) -> None:
    code, calls = run_ci(".ci/run", fake_venv, fail_when="python -m pytest*", fail_with=status)
    assert (code, calls[-1]) == (status, "python -m pytest -n 2")


def test_ruff_format_check_exits_non_zero_on_a_formatting_difference(tmp_path: Path) -> None:
    ruff = Path(sys.executable).with_name("ruff")
    (tmp_path / "bad.py").write_text("x = {  'a':1 }\n", encoding="utf-8")
    (tmp_path / "good.py").write_text('x = {"a": 1}\n', encoding="utf-8")
    assert subprocess.run([ruff, "format", "--check", tmp_path / "good.py"], capture_output=True).returncode == 0
    assert subprocess.run([ruff, "format", "--check", tmp_path / "bad.py"], capture_output=True).returncode == 1
    assert (tmp_path / "bad.py").read_text(encoding="utf-8") == "x = {  'a':1 }\n"  # --check changes nothing

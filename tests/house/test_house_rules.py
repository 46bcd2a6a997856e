"""House rules checked on the source: git runs only through `saddler.harness.gitcmd` (one place that sets the
environment, the locale and the disk-full handling), and GitPython only for read-only inspection."""

from __future__ import annotations

import ast
from pathlib import Path

from repo_paths import REPO

PACKAGES = ("saddler", "evodag", "benchmarks")
PROCESS_CALLS = {"run", "Popen", "check_output", "check_call", "call", "run_process_group"}


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def _starts_with_git(node: ast.expr) -> bool:
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        first = node.elts[0]
        return isinstance(first, ast.Constant) and first.value == "git"
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(" ")[0] == "git"


def _git_process_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in PROCESS_CALLS and _starts_with_git(node.args[0]):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_git_is_started_only_by_gitcmd() -> None:
    gitcmd = REPO / "saddler" / "harness" / "gitcmd.py"
    assert _git_process_calls(gitcmd), "the scan must see gitcmd's own call, or it sees nothing"
    outside = [hit for path in _sources() if path != gitcmd for hit in _git_process_calls(path)]
    assert outside == []


def test_gitpython_is_imported_only_for_read_only_inspection() -> None:
    importers = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if "git" in names or module == "git" or (module or "").startswith("git."):
                importers.append(str(path.relative_to(REPO)))
    assert importers == ["saddler/harness/uncommitted.py"]


def test_the_end_to_end_tests_live_in_e2e_and_the_quick_tier_leaves_them_out() -> None:
    """`tests/e2e/` holds the end-to-end runs; each file marks itself `slow`, so the quick tier (`-m "not slow"`,
    DEVELOPERS.md) leaves every one of them out."""
    e2e = sorted((REPO / "tests" / "e2e").glob("test_*.py"))
    assert e2e

    def marked(path: Path) -> bool:
        lines = path.read_text(encoding="utf-8").splitlines()
        return any(line.startswith("pytestmark = ") and "pytest.mark.slow" in line for line in lines)

    unmarked = [p.name for p in e2e if not marked(p)]
    assert unmarked == []
    flat = sorted(p.name for p in (REPO / "tests").glob("test_*.py"))
    modules = {p.stem for p in (REPO / "saddler").glob("*.py")}
    assert [n for n in flat if not any(n.startswith(f"test_{m}") for m in modules)] == [], (
        "a test at the top of tests/ is about one of saddler's top-level modules; the rest go in the folder of "
        "their package"
    )

"""`simwatch.WatchReads`, the trace side of the cheat audit: harness code that opens a benchmark file is logged,
whichever way the path reaches it (a symlinked file, a symlinked folder), and nothing else is."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from benchmarks.simwatch import WatchReads


def _harness_module(harness: Path) -> Any:
    """A module living in `harness` whose `read(path)` opens `path` (harness code, as the audit sees it)."""
    source = harness / "reader.py"
    source.write_text("def read(path):\n    with open(path, encoding='utf-8') as fh:\n        return fh.read()\n")
    spec = importlib.util.spec_from_file_location(f"reader_{abs(hash(str(harness)))}", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("way", ["direct", "symlinked file", "symlinked folder", "symlink in the workspace"])
def test_a_benchmark_file_the_harness_opens_is_logged_however_the_path_reaches_it(tmp_path: Path, way: str) -> None:
    watched, harness = tmp_path / "benchmark", tmp_path / "harness"
    (watched / "hidden").mkdir(parents=True)
    (watched / "hidden" / "answers.json").write_text("{}", encoding="utf-8")
    harness.mkdir()
    reader = _harness_module(harness)
    path = {
        "direct": watched / "hidden" / "answers.json",
        "symlinked file": harness / "answers.json",
        "symlinked folder": harness / "peek" / "answers.json",
        "symlink in the workspace": tmp_path / "work" / "a.json",
    }[way]
    if way == "symlink in the workspace":
        path.parent.mkdir()
        path.symlink_to(watched / "hidden" / "answers.json")
    if way == "symlinked file":
        path.symlink_to(watched / "hidden" / "answers.json")
    if way == "symlinked folder":
        (harness / "peek").symlink_to(watched / "hidden", target_is_directory=True)
    (harness / "notes.txt").write_text("mine", encoding="utf-8")
    logged: list[dict[str, Any]] = []
    with WatchReads(str(harness), str(watched), logged.append):
        reader.read(str(path))
        reader.read(str(harness / "notes.txt"))  # the harness's own file: not a read of the benchmark
    (tmp_path / "outside.txt").write_text("x", encoding="utf-8")
    Path(tmp_path / "outside.txt").read_text(encoding="utf-8")  # test code, not harness code
    assert logged == [{"type": "file_read", "path": "hidden/answers.json"}]

"""The README's minimal plugin (tasks + run only) runs through `saddler run`, by module path and by entry point."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from gitrepo import init_commit
from repo_paths import REPO
from typer.testing import CliRunner

from saddler.benchmark import load_benchmark
from saddler.cli.app import app

README = REPO / "docs" / "your-harness.md"  # where the plugin example lives
runner = CliRunner()


def readme_files() -> dict[str, str]:
    """Every fenced block of the plugin page whose first line is `# <relative path>`: path -> the block's text."""
    blocks = re.findall(r"^```(?:python|toml)\n# (\S+)\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)
    return {path: body for path, body in blocks}


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The README's my_bench.py and my-harness/ written out; my_bench importable here and in rollout children."""
    files = readme_files()
    assert {"my_bench.py", "my-harness/agent.py", "my-harness/saddler.toml"} <= set(files), sorted(files)
    root = tmp_path / "plugin"
    for rel, text in files.items():
        if rel.startswith("my_bench") or rel.startswith("my-harness/"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
    init_commit(root / "my-harness", branch="main")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", str(root))
    return root


def _init_and_run(root: Path, run_dir: Path, benchmark: str, iterations: int) -> dict:
    sets = [
        f"loop.max_iterations={iterations}", "loop.batch_size=4", "loop.test_runs=1", "executor.workers=2",
        "policies.phases=none",  # as the README's init line: this harness has nothing to steer
    ]  # fmt: skip
    args = ["init", str(run_dir), "--harness", str(root / "my-harness"), "--benchmark", benchmark]
    init = runner.invoke(app, [*args, *(x for s in sets for x in ("--set", s))])
    assert init.exit_code == 0, init.output
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_the_readme_plugin_runs_through_saddler_run(plugin_dir: Path, tmp_path: Path) -> None:
    bench = load_benchmark("my_bench:ArithmeticBench")
    assert (bench.name, bench.score_kind, bench.patch_bank()) == ("ArithmeticBench", "pass_rate", [])
    summary = _init_and_run(plugin_dir, tmp_path / "run", "my_bench:ArithmeticBench", 2)
    assert summary["termination"] == "max_iterations"
    assert summary["baseline_test"] == [0.5, 0.0] and summary["best_dev"] == 0.5  # adds right, multiplies wrong
    db = sqlite3.connect(tmp_path / "run" / "evodag.sqlite")
    rows = db.execute("SELECT task_id, split, seed, repetition, trace_path, passed FROM rollouts").fetchall()
    folders = {r[4] for r in rows}
    assert len(folders) == len({(r[0], r[1], r[2], r[3]) for r in rows})  # one trace folder per rollout
    for task, split, seed, rep, folder, _passed in rows:
        assert folder.endswith(f"/{split}/{task}-r{rep}-s{seed}")
        assert json.loads((Path(folder) / "trace.json").read_text())["answer"]
    evidence = [json.loads(p)["trace_paths"] for (p,) in db.execute(
        "SELECT payload FROM events WHERE kind = 'diagnosis.evidence'")]  # fmt: skip
    assert evidence and all(len(set(paths)) == len(paths) == 4 for paths in evidence)


@pytest.mark.slow
def test_an_entry_point_registers_a_short_name(plugin_dir: Path, tmp_path: Path) -> None:
    dist = plugin_dir / "my_bench-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-bench\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[saddler.benchmarks]\narithmetic = my_bench:ArithmeticBench\n")
    listing = json.loads(runner.invoke(app, ["list", "--json"]).stdout)
    described = "The harness's agent.py defines solve(question) -> str; a task passes when it returns the answer."
    assert {"name": "arithmetic", "description": described} in listing["benchmarks"]  # the class's own docstring
    assert type(load_benchmark("arithmetic")).__name__ == "ArithmeticBench"
    summary = _init_and_run(plugin_dir, tmp_path / "run", "arithmetic", 0)
    assert summary["baseline_test"] == [0.5, 0.0]

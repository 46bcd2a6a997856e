"""`saddler init` never damages a run and never leaves a half-made folder (issue 12, items 1 and 6):
`--force` on a folder another process is running is refused under the run lock; a bad `--set`, backend,
benchmark, harness or missing extra is refused before anything is created."""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from saddler.cli.app import app
from saddler.runlock import lock_holder
from saddler.sessions.registry import BACKENDS

runner = CliRunner()

HOLD_LOCK = """
import sys, time
from saddler.runlock import run_lock
with run_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(60)
"""


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


def _init(run: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["init", str(run), "--template", "opsdesk", *extra])
    return result.exit_code, result.output


def test_init_force_refuses_a_folder_whose_run_lock_is_held(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert _init(run)[0] == 0
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        assert lock_holder(run) == holder.pid
        before = _files(run)
        code, out = _init(run, "--force")
        assert code == 1
        assert out == (
            f"error: {run} is being run by process {holder.pid} (lock {run / '.lock'}); wait for it to finish or "
            f"`saddler stop {run}`\n"
        )
        assert _files(run) == before
    finally:
        holder.kill()
        holder.wait()
    assert lock_holder(run) is None
    assert _init(run, "--force")[0] == 0  # the holder is gone: replacing is fine now


@pytest.mark.slow
def test_init_force_during_a_real_run_leaves_the_run_to_finish_as_if_nothing_happened(
    tmp_path: Path, dag_signature: Callable[[Path], dict[str, Any]], make_run: Callable[..., Path]
) -> None:
    reference = make_run(tmp_path / "reference")
    subprocess.run([sys.executable, "-m", "saddler", "run", str(reference), "-q"], check=True, capture_output=True)
    run = make_run(tmp_path / "run")
    proc = subprocess.Popen(
        [sys.executable, "-m", "saddler", "run", str(run), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while lock_holder(run) != proc.pid:
            assert proc.poll() is None and time.monotonic() < deadline, "the run never took its lock"
            time.sleep(0.02)
        code, out = _init(run, "--force")
        assert code == 1 and "is being run by process" in out
    finally:
        _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    assert dag_signature(run) == dag_signature(reference)


def test_init_force_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    code, out = _init(mine, "--force")
    assert code == 2 and "is not a saddler run folder" in out
    assert (mine / "thesis.tex").read_text() == "years of work"


BAD_INITS = [
    (["--backend", "gpt"], f"run.sessions.backend: unknown backend 'gpt'; available: {', '.join(sorted(BACKENDS))}"),
    (["--set", "seed.x=3"], "--set seed.x=3: run.seed is not a table"),
    (["--set", "sessions.prompts.system=my.md"], "run.sessions.prompts.system: no such file"),
    (["--set", "sessions.prompts.nonsense=/etc/hostname"], "run.sessions.prompts.nonsense: unknown prompt template"),
    (["--set", 'executor.workers="2"'], "run.executor.workers: Input should be a valid integer"),
    (["--set", "loop.max_iterations=true"], "run.loop.max_iterations: Input should be a valid integer"),
    (["--set", "loop.batch_size=100000"], "run.loop.batch_size: Input should be less than or equal to 10000"),
    (["--set", "executor.timeout_s=inf"], "run.executor.timeout_s: Input should be a finite number"),
    (["--set", "loop.batch_size=41"], "run.loop.batch_size: 41 is more than the benchmark's 40 train task(s)"),
    (["--set", "benchmark_options.bogus=1"], "run.benchmark_options.bogus: not an option of benchmark 'opsdesk'"),
    (["--benchmark", "nope"], "run.benchmark: unknown benchmark 'nope'"),
    (["--benchmark", "no_such_module:Bench"], "run.benchmark: cannot import 'no_such_module:Bench'"),
    (["--set", "sessions.backend=command"], 'run.sessions.command: backend = "command" needs a command'),
    (["--set", "executor.kind=ray"], "run.executor.kind: ray is not installed"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INITS, ids=[" ".join(a) for a, _ in BAD_INITS])
def test_a_bad_init_is_refused_with_its_dotted_path_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setattr("saddler.run.preflight.module_available", lambda name: name != "ray")
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "new"
    code, out = _init(run, *args)
    assert code == 2, out
    assert out.startswith("error: ") and message in out, out
    assert not (tmp_path / "runs").exists()


def test_a_bad_init_with_force_leaves_the_existing_run_untouched(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert _init(run)[0] == 0
    before = _files(run)
    code, out = _init(run, "--force", "--set", "seed.x=3")
    assert code == 2 and "run.seed is not a table" in out
    assert _files(run) == before


def test_the_clone_folder_cannot_be_overridden_at_init(tmp_path: Path) -> None:
    """`run.harness` names where init clones the harness (always `harness`): an override used to create a folder
    that `saddler validate` then refused ("no such folder 'h2'")."""
    code, out = _init(tmp_path / "run", "--set", "harness=h2")
    assert code == 2
    assert out == (
        "error: --set harness='h2': run.harness is the folder saddler init clones the harness into, always "
        "'harness'; it cannot be set\n"
    )
    assert not (tmp_path / "run").exists()


def test_a_harness_without_saddler_toml_or_a_missing_one_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    (bare / "tools").mkdir(parents=True)
    (bare / "tools" / "x.py").write_text("x = 1\n")
    result = runner.invoke(app, ["init", str(tmp_path / "a"), "--harness", str(bare), "--benchmark", "opsdesk"])
    assert result.exit_code == 2 and f"--harness {bare}: no saddler.toml" in result.output
    missing = runner.invoke(app, ["init", str(tmp_path / "b"), "--harness", str(tmp_path / "nowhere"), "-b", "opsdesk"])
    assert missing.exit_code == 2 and "--harness" in missing.output and "no such folder" in missing.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_nested_tables_and_prompt_overrides_are_written_as_real_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = tmp_path / "my.md"
    prompt.write_text("You are careful.\n")
    monkeypatch.chdir(tmp_path)  # a relative prompt path is the current folder's file, written as absolute
    code, out = _init(tmp_path / "run", "--set", "sessions.prompts.system=my.md", "--set", 'name="a \\"quoted\\" run"')
    assert code == 0, out
    cfg = tomllib.loads((tmp_path / "run" / "saddler.toml").read_text())["run"]
    assert cfg["sessions"]["prompts"] == {"system": str(prompt)} and cfg["name"] == 'a "quoted" run'
    assert runner.invoke(app, ["validate", str(tmp_path / "run")]).output == "ok\n"


@pytest.mark.parametrize("template", ["opsdesk", "repofix", "claude_agent", "skill"])
def test_every_bundled_template_validates(tmp_path: Path, template: str) -> None:
    run = tmp_path / template
    assert runner.invoke(app, ["init", str(run), "--template", template]).exit_code == 0
    result = runner.invoke(app, ["validate", str(run)])
    assert (result.exit_code, result.output) == (0, "ok\n")

"""The Harbor adapter: the `harbor run` command of one trial, and results read from recorded Harbor output.

Harbor (Python >= 3.12, Docker) cannot run here: a stand-in CLI (tests/fake_harbor.py) records the command it
gets and replays recorded job folders (tests/fixtures/harbor, written from Harbor's documented layout)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.harbor import MISSING_CLI, HarborBenchmark
from benchmarks.harbor.trial import build_command
from saddler.benchmark import Task
from saddler.cli.app import app
from saddler.errors import ConfigError

FAKE = Path(__file__).with_name("fake_harbor.py")
TASKS = {"train": ["fix-git", "hello-world"], "dev": ["regex-log"], "test": ["sqlite-db-truncate"]}


def _bench(**options: object) -> HarborBenchmark:
    base: dict[str, object] = {"agent_import_path": "my_agent:TerminalAgent", "dataset": "terminal-bench@2.0",
                               "tasks": TASKS, "model": "anthropic/claude-sonnet-4-5"}  # fmt: skip
    return HarborBenchmark(**{**base, **options})  # type: ignore[arg-type]


@pytest.fixture
def fake_harbor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`harbor` on PATH is the stand-in; returns the file its last call is recorded to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "harbor"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    record = tmp_path / "harbor-call.json"
    monkeypatch.setenv("FAKE_HARBOR_RECORD", str(record))
    return record


def test_the_command_of_one_trial(tmp_path: Path) -> None:
    task = Task("fix-git", "fix-git", "train")
    bench = _bench(agent_kwargs={"max_turns": 40}, timeout_multiplier=2.0, env="daytona", extra_args=["--debug"])
    assert build_command(bench, task, 17, tmp_path / "jobs") == [
        "harbor", "run", "-d", "terminal-bench@2.0", "-i", "fix-git", "--agent-import-path", "my_agent:TerminalAgent",
        "-m", "anthropic/claude-sonnet-4-5", "--ak", "max_turns=40", "--ae", "SADDLER_BENCH_SEED=17", "-e", "daytona",
        "-k", "1", "-n", "1", "--timeout-multiplier", "2", "--job-name", "saddler", "--jobs-dir",
        str(tmp_path / "jobs"), "-y", "--debug",
    ]  # fmt: skip
    local = HarborBenchmark(agent_import_path="a:B", path=str(tmp_path / "tasks"), harbor="/opt/harbor")
    assert build_command(local, task, 1, tmp_path / "j")[:4] == ["/opt/harbor", "run", "-p", str(tmp_path / "tasks")]


def test_options_are_checked_with_messages_that_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match='agent_import_path = "module:Class"'):
        HarborBenchmark(dataset="terminal-bench@2.0", tasks=TASKS)
    with pytest.raises(ConfigError, match="exactly one of"):
        HarborBenchmark(agent_import_path="a:B")
    with pytest.raises(ConfigError, match="cannot list a dataset's tasks"):
        HarborBenchmark(agent_import_path="a:B", dataset="terminal-bench@2.0")
    with pytest.raises(ConfigError, match="absolute path"):
        HarborBenchmark(agent_import_path="a:B", path="tasks")
    assert [t.id for t in _bench().tasks("train")] == ["fix-git", "hello-world"]


def test_a_local_dataset_is_split_by_a_hash_of_its_task_names(tmp_path: Path) -> None:
    for i in range(12):
        (tmp_path / "tasks" / f"task-{i:02d}").mkdir(parents=True)
        (tmp_path / "tasks" / f"task-{i:02d}" / "task.toml").write_text('version = "1.0"\n')
    bench = HarborBenchmark(agent_import_path="a:B", path=str(tmp_path / "tasks"))
    ids = {s: [t.id for t in bench.tasks(s)] for s in ("train", "dev", "test")}
    assert sorted(i for v in ids.values() for i in v) == [f"task-{i:02d}" for i in range(12)]
    assert all(ids.values()) and ids == {s: [t.id for t in bench.tasks(s)] for s in ids}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("passed", (1.0, True, "success", 0.0412, None)),
        ("failed", (0.0, False, "task_failure", 0.0412, None)),
        ("agent_error", (0.0, False, "task_failure", 0.0412, "my_agent.py")),
        ("docker_error", (0.0, False, "infra_error", 0.0, None)),
        ("timeout", (0.0, False, "timeout", 0.0412, None)),
    ],
)
def test_recorded_trials_are_read_back_honestly(
    case: str, expected: tuple, fake_harbor: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HARBOR_CASE", case)
    harness = tmp_path / "harness"
    harness.mkdir()
    bench = _bench()
    task = bench.tasks("train")[0]
    out = bench.run(harness, task, 5, tmp_path / "trace")
    assert (out.score, out.passed, out.disposition, out.cost, out.failure_file) == expected, out.error_tail
    call = json.loads(fake_harbor.read_text())
    assert call["argv"] == build_command(bench, task, 5, tmp_path / "trace" / "jobs")[1:]
    assert call["cwd"] == str(harness) and call["pythonpath"].split(":")[0] == str(harness)
    transcript = Path(out.trace_path or "").read_text()
    assert transcript.startswith("# Harbor trial fix-git__")
    if case == "passed":
        assert '- tool call `bash` {"command": "cd /app && git reset --hard 9f8e7d6"}' in transcript
        assert "2 passed in 0.41s" in transcript
    if case == "failed":
        assert "verifier reward 0.0" in out.rationale and "AssertionError: assert 'add feature'" in transcript
    if case == "agent_error":
        assert out.rationale == "IndexError: list index out of range" and 'my_agent.py", line 41' in out.error_tail
    if case == "docker_error":
        assert "Cannot connect to the Docker daemon" in out.error_tail


def test_harbor_failing_without_a_result_is_an_infra_error(
    fake_harbor: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HARBOR_CASE", "no_result")
    (tmp_path / "h").mkdir()
    out = _bench().run(tmp_path / "h", _bench().tasks("dev")[0], 1, tmp_path / "trace")
    assert (out.passed, out.disposition) == (False, "infra_error")
    assert "harbor wrote no trial result" in out.error_tail and "Docker is not running" in out.error_tail


def test_a_missing_harbor_cli_is_an_infra_error_and_the_doctor_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    bench = _bench()
    out = bench.run(tmp_path, bench.tasks("test")[0], 1, tmp_path / "trace")
    assert (out.passed, out.disposition, out.error_tail) == (False, "infra_error", MISSING_CLI)
    assert bench.check() == [MISSING_CLI, "env = docker but no docker CLI on PATH: install Docker, or use a cloud "
                                          "sandbox (env)"]  # fmt: skip
    run = tmp_path / "run"
    run.mkdir()
    options = 'agent_import_path = "my_agent:TerminalAgent"\ndataset = "terminal-bench@2.0"\n' \
              'tasks = {train = ["fix-git"], dev = ["regex-log"], test = ["hello-world"]}\n'  # fmt: skip
    (run / "saddler.toml").write_text(f'[run]\nbenchmark = "harbor"\n[run.benchmark_options]\n{options}')
    git = Path("/usr/bin/git")
    monkeypatch.setenv("PATH", f"{tmp_path / 'empty'}:{git.parent}")
    result = CliRunner().invoke(app, ["doctor", str(run), "--json"])
    checks = [c for c in json.loads(result.stdout)["checks"] if c["name"] == "benchmark:harbor"]
    assert checks[0] == {"name": "benchmark:harbor", "ok": False, "required": True, "detail": MISSING_CLI}
    assert result.exit_code == 1

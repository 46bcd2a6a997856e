"""The Harbor adapter: trials read back from job folders recorded from real Harbor 0.26.0, one Harbor job per
evaluation batch, and (when a Harbor install is here) real Harbor end to end in the bundled bubblewrap environment.

Real Harbor is found at `$SADDLER_TEST_HARBOR`, else `.venv-harbor/bin/harbor` (scripts/test.sh makes it with a
Python 3.12 when it finds one). The stand-in CLI (tests/fake_harbor.py) replays the recorded trials."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from repo_paths import TESTS
from typer.testing import CliRunner

from benchmarks.harbor import MISSING_CLI, HarborBenchmark
from benchmarks.harbor.job import build_command, job_config, plan_jobs
from benchmarks.harbor.trial import result_of
from saddler.benchmark import Batch, BatchRollout, RolloutResult, Task
from saddler.cli.app import app
from saddler.errors import ConfigError

HERE = TESTS
FAKE = HERE / "fake_harbor.py"
FIXTURES = HERE / "fixtures" / "harbor"
RECORDED = FIXTURES / "recorded"
TASKS = {"train": ["fix-git", "hello-world"], "dev": ["regex-log"], "test": ["sqlite-db-truncate"]}
REAL_HARBOR = os.environ.get("SADDLER_TEST_HARBOR") or str(HERE.parent / ".venv-harbor" / "bin" / "harbor")
HAS_HARBOR = os.access(REAL_HARBOR, os.X_OK) and shutil.which("bwrap") is not None
needs_harbor = pytest.mark.skipif(
    not HAS_HARBOR, reason="needs a Harbor install (SADDLER_TEST_HARBOR or .venv-harbor: Python 3.12) and bwrap"
)


def _bench(**options: object) -> HarborBenchmark:
    base: dict[str, object] = {"agent_import_path": "agent:Agent", "dataset": "terminal-bench@2.0", "tasks": TASKS,
                               "model": "anthropic/claude-sonnet-4-5"}  # fmt: skip
    return HarborBenchmark(**{**base, **options})  # type: ignore[arg-type]


def _recorded(case: str) -> dict:
    return json.loads(next((RECORDED / case).glob("*/result.json")).read_text())


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


@pytest.mark.parametrize(
    ("case", "expected", "why"),
    [
        ("passed", (1.0, True, "success", None), ""),
        ("failed", (0.0, False, "task_failure", None), "verifier reward 0.0"),
        ("agent_timeout", (0.0, False, "timeout", "agent.py"), "AgentTimeoutError: Agent execution timed out after 5"),
        ("agent_exception", (0.0, False, "task_failure", "agent.py"),
         "ValueError: the agent lost its way (raised at agent.py:27 of the harness)"),
        ("multi_step", (0.5, False, "task_failure", "agent.py"), "ValueError in step second: the agent lost its way"),
    ],
)  # fmt: skip
def test_recorded_trials_are_read_as_harbor_wrote_them(case: str, expected: tuple, why: str) -> None:
    """Harbor grades after a timeout or an agent exception (reward 0.0 with `exception_info`): the exception, not
    the reward, says what happened, and the harness file in the traceback is the failure's file."""
    data = _recorded(case)
    out = result_of(data, task_id="hello", harness_dir=FIXTURES / "harness", reward_key="reward", pass_threshold=1.0,
                    transcript=Path("transcript.md"))  # fmt: skip
    assert (out.score, out.passed, out.disposition, out.failure_file) == expected
    assert why in out.rationale


def test_a_reward_harbor_marks_invalid_is_an_infra_error() -> None:
    data = _recorded("failed")
    data["exception_info"] = {"exception_type": "EnvironmentStartTimeoutError", "exception_message": "no sandbox",
                              "exception_traceback": "", "policy": {"has_valid_reward": False}}  # fmt: skip
    data["reward_valid"] = False
    out = result_of(data, task_id="hello", harness_dir=FIXTURES / "harness", reward_key="reward", pass_threshold=1.0,
                    transcript=Path("t.md"))  # fmt: skip
    assert (out.disposition, out.score) == ("infra_error", 0.0)
    assert out.rationale == "EnvironmentStartTimeoutError: no sandbox: Harbor records no valid reward for it"


def test_a_batch_is_one_job_of_every_task_and_repetition(tmp_path: Path) -> None:
    bench = _bench(agent_kwargs={"max_turns": 40}, timeout_multiplier=2.0, env="daytona", extra_args=["--debug"])
    rollouts = [BatchRollout(Task(t, t, "train"), seed, rep, tmp_path / f"{t}{rep}")
                for t in ("fix-git", "hello-world") for rep, seed in enumerate((11, 12))]  # fmt: skip

    def jobs(items: list[BatchRollout]) -> list[set[tuple[str, int]]]:
        return [{(r.task.id, r.seed) for r in job} for job in plan_jobs(items)]

    assert jobs(rollouts) == [{(r.task.id, r.seed) for r in rollouts}]
    config = job_config(bench, rollouts)
    agent = {"import_path": "agent:Agent", "kwargs": {"max_turns": 40}, "model_name": "anthropic/claude-sonnet-4-5"}
    assert config == {"agents": [
        {**agent, "env": {"SADDLER_BENCH_SEED": "11", "SADDLER_BENCH_REPETITION": "0"}},
        {**agent, "env": {"SADDLER_BENCH_SEED": "12", "SADDLER_BENCH_REPETITION": "1"}},
    ]}  # fmt: skip
    argv = build_command(bench, rollouts, tmp_path / "c.json", tmp_path / "jobs", "saddler-0-0", 4)
    assert argv == [
        "harbor", "run", "-c", str(tmp_path / "c.json"), "-d", "terminal-bench@2.0", "-i", "fix-git", "-i",
        "hello-world", "-e", "daytona", "-k", "1", "-n", "4", "--timeout-multiplier", "2", "--job-name",
        "saddler-0-0", "--jobs-dir", str(tmp_path / "jobs"), "-y", "--debug",
    ]  # fmt: skip
    assert "--agent-import-path" not in argv  # deprecated in Harbor 0.26: the agent is in the job config
    # a batch that is not a grid (one rollout already stored) becomes as few grids as it takes
    assert jobs(rollouts[1:]) == [{("fix-git", 12), ("hello-world", 12)}, {("hello-world", 11)}]


def _run_batch(bench: HarborBenchmark, harness: Path, tmp_path: Path, rollouts: list[BatchRollout],
               workers: int = 2) -> dict[tuple[str, int], RolloutResult]:  # fmt: skip
    got: dict[tuple[str, int], RolloutResult] = {}
    batch = Batch(harness, tuple(rollouts), tmp_path / "batch", workers, dict(os.environ), 120.0)
    bench.run_batch(batch, lambda r, result: got.setdefault((r.task.id, r.seed), result))
    return got


def test_each_trial_lands_in_its_rollouts_trace_folder(
    fake_harbor: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HARBOR_CASE", "agent_exception")
    harness = shutil.copytree(FIXTURES / "harness", tmp_path / "harness")
    rollouts = [BatchRollout(Task(t, t, "train"), s, r, tmp_path / "traces" / f"{t}-{r}")
                for t in ("fix-git", "hello-world") for r, s in enumerate((3, 4))]  # fmt: skip
    got = _run_batch(_bench(), harness, tmp_path, rollouts)
    assert sorted(got) == [("fix-git", 3), ("fix-git", 4), ("hello-world", 3), ("hello-world", 4)]
    assert {(r.disposition, r.failure_file) for r in got.values()} == {("task_failure", "agent.py")}
    call = json.loads(fake_harbor.read_text())
    assert call["cwd"] == str(harness) and call["env"]["PYTHONPATH"].split(":")[0] == str(harness)
    assert call["env"]["HARBOR_TELEMETRY"] == "0" and call["env"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    transcript = (tmp_path / "traces" / "fix-git-1" / "transcript.md").read_text()
    assert f"Trial folder: `{tmp_path / 'traces' / 'fix-git-1' / 'trial'}`" in transcript  # where the files are now
    assert (tmp_path / "traces" / "fix-git-1" / "trial" / "result.json").is_file()
    assert 'harness/agent.py", line 27, in run' in transcript
    assert not list((tmp_path / "batch" / "jobs").glob("*/*__*"))  # the trials moved out of the job folder


def test_no_docker_daemon_is_an_infra_error_that_says_so(
    fake_harbor: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Harbor 0.26.0 without a Docker daemon exits 1 before it makes any job folder (recorded)."""
    monkeypatch.setenv("FAKE_HARBOR_CASE", "no_docker")
    rollouts = [BatchRollout(Task("fix-git", "fix-git", "dev"), 1, 0, tmp_path / "t")]
    out = _run_batch(_bench(), tmp_path, tmp_path, rollouts)[("fix-git", 1)]
    assert (out.passed, out.disposition) == (False, "infra_error")
    assert out.rationale == (
        "harbor run exited 1 without a result for this trial: Docker daemon is not running. Please start Docker "
        "and try again."
    )


def test_a_job_stopped_half_way_hands_on_what_landed(
    fake_harbor: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HARBOR_CASE", "passed")
    monkeypatch.setenv("FAKE_HARBOR_LIMIT", "1")
    rollouts = [BatchRollout(Task(t, t, "train"), 5, 0, tmp_path / t) for t in ("fix-git", "hello-world")]
    got = _run_batch(_bench(), tmp_path, tmp_path, rollouts)
    assert (got[("fix-git", 5)].disposition, got[("hello-world", 5)].disposition) == ("success", "infra_error")


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


def test_the_doctor_finds_a_docker_cli_whose_daemon_is_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("docker", "echo 'Cannot connect to the Docker daemon' >&2; exit 1"), ("harbor", "exit 0")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert _bench().check() == [
        'env = docker but the Docker daemon is not running (`docker info` failed): start Docker, or use a cloud '
        'sandbox or env = "bwrap"'
    ]  # fmt: skip
    assert _bench(env="bwrap").check() == ([] if shutil.which("bwrap") else ["env = bwrap but bwrap is not on PATH: "
                                                                             "apt-get install bubblewrap"])  # fmt: skip


def _tasks(root: Path, names: list[str]) -> Path:
    for name in names:
        shutil.copytree(FIXTURES / "tasks" / "hello", root / name)
    return root


@needs_harbor
def test_real_harbor_runs_a_batch_in_bubblewrap_and_the_seed_reaches_the_agent(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "tasks", ["alpha", "beta"])
    harness = shutil.copytree(FIXTURES / "harness", tmp_path / "harness")
    bench = HarborBenchmark(agent_import_path="agent:Agent", path=str(tasks), env="bwrap", harbor=REAL_HARBOR,
                            tasks={"train": ["alpha", "beta"], "dev": [], "test": []})  # fmt: skip
    rollouts = [BatchRollout(Task(t, t, "train"), s, r, tmp_path / "traces" / f"{t}-{r}")
                for t in ("alpha", "beta") for r, s in enumerate((21, 22))]  # fmt: skip
    got = _run_batch(bench, harness, tmp_path, rollouts)
    assert {k: (r.disposition, r.score) for k, r in got.items()} == {
        (t, s): ("success", 1.0) for t in ("alpha", "beta") for s in (21, 22)
    }
    assert len(list((tmp_path / "batch").glob("saddler-*.json"))) == 1  # one Harbor job for the whole batch
    for rollout in rollouts:
        data = json.loads((rollout.trace_dir / "trial" / "result.json").read_text())
        seed = str(rollout.seed)
        assert data["agent_result"]["metadata"] == {"seed": seed, "seen_in_sandbox": f"seed={seed}"}
    (harness / "behaviour.txt").write_text("crash\n")
    crashed = _run_batch(bench, harness, tmp_path / "again", rollouts[:1])[("alpha", 21)]
    assert (crashed.disposition, crashed.failure_file) == ("task_failure", "agent.py")


@needs_harbor
@pytest.mark.slow
def test_saddler_run_optimizes_a_harbor_benchmark_with_real_harbor(
    tmp_path: Path, source_repo: Callable[..., Path]
) -> None:
    tasks = _tasks(tmp_path / "tasks", ["t1", "t2", "d1", "x1"])
    files = {p.name: p.read_text() for p in (FIXTURES / "harness").iterdir() if p.is_file()}
    harness = source_repo(tmp_path / "harness", {**files, "behaviour.txt": "fail\n"})
    command = (
        f"{sys.executable} {HERE / 'metric_agent.py'} {tmp_path / 'agent-state'} pass behaviour.txt {{prompt_file}}"
    )
    options = {
        "agent_import_path": '"agent:Agent"',
        "path": json.dumps(str(tasks)),
        "env": '"bwrap"',
        "harbor": json.dumps(REAL_HARBOR),
        "tasks": '{train = ["t1", "t2"], dev = ["d1"], test = ["x1"]}',
    }
    sets = {**{f"benchmark_options.{k}": v for k, v in options.items()}, "sessions.command": json.dumps(command),
            "loop.max_iterations": "1", "loop.batch_size": "2", "loop.test_runs": "1", "policies.phases": '"none"',
            "executor.workers": "2", "executor.timeout_s": "120"}  # fmt: skip
    run_dir = tmp_path / "run"
    args = ["init", str(run_dir), "--harness", str(harness), "--benchmark", "harbor", "--backend", "command"]
    runner = CliRunner()
    init = runner.invoke(app, [*args, *(x for k, v in sets.items() for x in ("--set", f"{k}={v}"))])
    assert init.exit_code == 0, init.output
    result = runner.invoke(app, ["run", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["baseline_test"][0], summary["best_test"][0], summary["best_dev"]) == (0.0, 1.0, 1.0)
    batches = list((run_dir / "traces").rglob("batch-*"))
    assert batches and all(len(list(b.glob("saddler-*.json"))) == 1 for b in batches)  # one Harbor job per batch

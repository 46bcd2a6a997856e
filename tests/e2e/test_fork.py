"""`saddler fork RUN NEW --from-iteration N`: NEW holds RUN's history up to N and continues on its own, paying
for nothing twice."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from repo_paths import FAKE_AGENT
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.run.folder import init_run

pytestmark = pytest.mark.slow
runner = CliRunner()
FAKE = FAKE_AGENT


class CountingExecutor:
    def __init__(self, inner: Any) -> None:
        self.inner, self.executed = inner, 0

    def run(self, jobs: Any, on_result: Any) -> None:
        self.executed += len(jobs)
        self.inner.run(jobs, on_result)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[CountingExecutor]:
    import saddler.run.context as context

    made: list[CountingExecutor] = []
    real = context.make_executor

    def counting(cfg: Any) -> CountingExecutor:
        made.append(CountingExecutor(real(cfg)))
        return made[-1]

    monkeypatch.setattr(context, "make_executor", counting)
    return made


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def _sessions(run_dir: Path, up_to: int = 10**6) -> list[tuple[Any, ...]]:
    with sqlite3.connect(run_dir / "evodag.sqlite") as conn:
        return conn.execute(
            "select iteration, role, node_id, attempt, cost_usd, outcome, result, change_sha from sessions "
            "where iteration <= ? order by iteration, role, attempt",
            (up_to,),
        ).fetchall()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, make_run: Callable[..., Path]) -> Path:
    run_dir = make_run(tmp_path_factory.mktemp("fork") / "source")
    assert _cli("run", str(run_dir), "--quiet")[0] == 0
    return run_dir


def test_the_fork_holds_the_history_up_to_n(source: Path, tmp_path: Path, run_git: Callable[..., Any]) -> None:
    fork = tmp_path / "fork"
    code, output = _cli("fork", str(source), str(fork), "--from-iteration", "3", "--json")
    assert code == 0, output
    info = json.loads(output)
    with EvoDAG(source / "evodag.sqlite", readonly=True) as src, EvoDAG(fork / "evodag.sqlite", readonly=True) as new:
        src_nodes = [n for n in src.nodes() if n.iteration <= 3]
        assert [(n.id, n.commit, n.status, n.dev_mean) for n in new.nodes()] == [
            (n.id, n.commit, n.status, n.dev_mean) for n in src_nodes
        ]
        assert all(n.test_mean is None for n in new.nodes()), "test is opened at the end of a run only"
        assert [(i.number, i.decision, i.candidate_id) for i in new.iterations()] == [
            (i.number, i.decision, i.candidate_id) for i in src.iterations() if i.number <= 3
        ]
        assert [e.id for e in new.edges()] == [e.id for e in src.edges() if e.child_id in {n.id for n in src_nodes}]
        assert [les.text for les in new.lessons()] == [les.text for les in src.lessons() if (les.iteration or 0) <= 3]
        assert new.get_run().status == "paused" and new.get_run().best_node_id == info["best_node"]
        assert {r.split for r in new.rollouts()} == {"train", "dev"}
        assert new.count_rollouts() == info["rollouts"] == len(new.rollouts())
        for row in new.rollouts():
            assert row.trace_path is None or (row.trace_path.startswith(str(fork)) and Path(row.trace_path).is_file())
        forked = [e.payload for e in new.events() if e.kind == "run.forked"]
        assert forked == [{"source": str(source.resolve()), "from_iteration": 3, "changed": {}}]
        last_src_event = max(e.id for e in src.events() if e.kind == "iteration.updated" and e.payload.get("id") == 3)
        assert [e.id for e in new.events()][: len([1 for e in src.events() if e.id <= last_src_event])] == [
            e.id for e in src.events() if e.id <= last_src_event
        ]
    assert _sessions(fork) == _sessions(source, up_to=3) and info["sessions"] == len(_sessions(fork))
    kept = run_git(fork, "for-each-ref", "--format=%(refname)", "refs/saddler/c/").stdout.split()
    assert sorted(ref.rsplit("/", 1)[1] for ref in kept) == sorted({n.commit for n in src_nodes})
    assert run_git(fork, "fsck", "--no-progress").returncode == 0


def test_the_fork_continues_where_the_source_went_without_paying_again(
    source: Path, tmp_path: Path, counted: list[CountingExecutor], dag_signature: Callable[[Path], dict[str, Any]]
) -> None:
    fork = tmp_path / "fork"
    assert _cli("fork", str(source), str(fork), "--from-iteration", "2")[0] == 0
    before = (source / "evodag.sqlite").stat().st_mtime_ns
    assert _cli("run", str(fork), "--quiet")[0] == 0
    with EvoDAG(fork / "evodag.sqlite", readonly=True) as new:
        test_rollouts = len(new.rollouts(split="test"))
    assert test_rollouts and sum(c.executed for c in counted) == test_rollouts, (
        "every search rollout came from the source's store; test is evaluated afresh (a fork carries no test data)"
    )
    expected, got = dag_signature(source), dag_signature(fork)
    assert got == expected
    assert (source / "evodag.sqlite").stat().st_mtime_ns == before, "the source is never written"


def test_a_fork_carries_no_test_data_in_any_form(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run_dir = make_run(tmp_path / "source", loop={"max_iterations": 2})
    assert _cli("run", str(run_dir), "--quiet")[0] == 0  # finished: its best was evaluated on test
    config = run_dir / "saddler.toml"
    config.write_text(config.read_text().replace("max_iterations = 2", "max_iterations = 4"))
    assert _cli("run", str(run_dir), "--quiet")[0] == 0  # the search went on, then test again at the end
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as src:
        test_keys = {r.cache_key for r in src.rollouts(split="test")}
        tested = [n.id for n in src.nodes() if n.test_mean is not None and n.iteration <= 3]
    assert test_keys and tested, "the source holds test results from before the fork point"
    fork = tmp_path / "fork"
    code, output = _cli("fork", str(run_dir), str(fork), "--from-iteration", "3")
    assert code == 0, output
    found = [p for p in fork.rglob("*") if p.is_dir() and p.name == "test"]
    assert not found, "test traces were copied"
    assert not (fork / "heldout").exists() or not list((fork / "heldout").glob("n*/test"))
    with EvoDAG(fork / "evodag.sqlite", readonly=True) as new:
        assert not new.rollouts(split="test")
        assert all(n.test_mean is None and n.test_std is None for n in new.nodes())
        assert not test_keys & set(new.cache_get_many(test_keys)), "test rollouts went to the fork's cache"
        assert not [e for e in new.events() if "test_mean" in e.payload or "test_std" in e.payload]
        for row in new.rollouts(split="dev"):
            assert row.trace_path is None or Path(row.trace_path).is_file()


def test_a_fork_with_other_settings_records_what_changed(source: Path, tmp_path: Path) -> None:
    fork = tmp_path / "fork"
    code, output = _cli("fork", str(source), str(fork), "--from-iteration", "4", "--set", "policies.phases=none")
    assert code == 0 and "changed: policies.phases" in output, output
    assert _cli("run", str(fork), "--quiet")[0] == 0, "its new inputs are the fork's own"
    with EvoDAG(fork / "evodag.sqlite", readonly=True) as store:
        forked = [e.payload["changed"] for e in store.events() if e.kind == "run.forked"]
        phases = [i.phase for i in store.iterations()]
    assert forked == [{"policies.phases": ["capability_then_steering", "none"]}]
    assert phases[:4] == ["capability"] * 4 and set(phases[4:]) == {"none"}


def test_fork_refuses_what_it_cannot_do(source: Path, tmp_path: Path) -> None:
    code, output = _cli("fork", str(source), str(tmp_path / "f"), "--from-iteration", "7")
    assert code == 2 and "cannot fork from iteration 7: the run has finished iterations 1..6; choose 0..6" in output
    assert not (tmp_path / "f").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    code, output = _cli("fork", str(source), str(tmp_path / "full"), "--from-iteration", "1")
    assert code == 1 and "is not empty" in output


def test_a_fork_setting_below_a_value_is_the_clear_config_error(source: Path, tmp_path: Path) -> None:
    code, output = _cli("fork", str(source), str(tmp_path / "f"), "--from-iteration", "1", "--set", "seed.x=3")
    assert code == 2 and "--set seed.x=3: run.seed is not a table" in output, output
    assert not (tmp_path / "f").exists()


def test_a_paid_fork_replays_its_history_and_pays_only_for_what_is_new(
    tmp_path: Path, dag_signature: Callable[[Path], dict[str, Any]]
) -> None:
    overrides = {
        "loop": {"max_iterations": 4, "batch_size": 3, "test_runs": 1, "parallel_iterations": 1},  # the same DAG again
        "executor": {"workers": 1},
        "sessions": {"command": f"{sys.executable} {FAKE} {{prompt_file}}"},
    }
    src = tmp_path / "source"
    init_run(src, template="opsdesk", seed=1, backend="command", overrides=overrides)
    assert _cli("run", str(src), "--quiet")[0] == 0
    fork = tmp_path / "fork"
    assert _cli("fork", str(src), str(fork), "--from-iteration", "2")[0] == 0
    copied = _sessions(fork)
    assert copied == _sessions(src, up_to=2) and sum(row[4] for row in copied) > 0
    transcripts = [Path(p) for (p,) in sqlite3.connect(fork / "evodag.sqlite").execute(
        "select transcript_path from sessions")]  # fmt: skip
    assert transcripts and all(p.is_file() and p.is_relative_to(fork) for p in transcripts)
    assert _cli("run", str(fork), "--quiet")[0] == 0
    assert _sessions(fork) == _sessions(src), "the same sessions, iterations 1-2 not paid again"
    assert dag_signature(fork) == dag_signature(src)

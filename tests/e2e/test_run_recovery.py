"""A run folder after a crash, a pause, a stop or its end (issue 12, items 4 and 7): stale git locks are removed
and said; `status` tells a dead run from a live one; a finished run re-run writes nothing; a pause before the
first run spends nothing; stop -> resume leaves only the current best in best/. Real CLI, real opsdesk runs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.harness.gitcmd import remove_stale_locks, stale_locks

pytestmark = pytest.mark.slow
runner = CliRunner()


def _saddler(*args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SADDLER_FAULT"}
    if fault:
        env["SADDLER_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "saddler", *args], env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, make_run: Callable[..., Path]) -> Path:
    run = make_run(tmp_path_factory.mktemp("ref") / "run")
    assert _saddler("run", str(run), "-q").returncode == 0
    return run


def _commits(run: Path) -> list[str]:
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        return [n.commit for n in store.nodes()]


def test_stale_git_locks_from_a_killed_run_are_removed_and_named(
    tmp_path: Path, reference: Path, dag_signature: Callable[[Path], dict[str, Any]], make_run: Callable[..., Path]
) -> None:
    run = make_run(tmp_path / "run")
    assert _saddler("run", str(run), "-q", fault="session:1").returncode == -9
    git_dir = run / "harness" / ".git"
    candidate = _commits(reference)[1]  # the commit the resumed run is about to keep with refs/saddler/c/<sha>
    planted = [
        git_dir / "refs" / "saddler" / "c" / f"{candidate}.lock",
        git_dir / "index.lock",
        git_dir / "config.lock",
        git_dir / "HEAD.lock",
        git_dir / "packed-refs.lock",
    ]
    eval_checkouts = sorted((git_dir / "worktrees").iterdir())
    assert eval_checkouts, "the killed run left its evaluation checkouts registered"
    planted.append(eval_checkouts[0] / "index.lock")
    past = time.time() - 120
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        os.utime(path, (past, past))
    resumed = _saddler("run", str(run))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    said = [line for line in resumed.stderr.splitlines() if line.startswith("removed a stale git lock")]
    assert said == [f"removed a stale git lock left by a killed run: {p.relative_to(run)}" for p in sorted(planted)]
    assert stale_locks(git_dir, time.time() + 1) == []
    assert dag_signature(run) == dag_signature(reference)
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        logged = [e.payload["path"] for e in store.events() if e.kind == "recovery.git_lock_removed"]
    assert logged == [str(p.relative_to(run)) for p in sorted(planted)]


def test_only_locks_older_than_the_run_lock_are_stale(tmp_path: Path) -> None:
    git_dir = tmp_path / ".git"
    (git_dir / "refs" / "heads").mkdir(parents=True)
    (git_dir / "objects" / "ab").mkdir(parents=True)
    old, new, loose = (
        git_dir / "index.lock",
        git_dir / "refs" / "heads" / "main.lock",
        git_dir / "objects" / "ab" / "x.lock",
    )
    for path in (old, new, loose):
        path.write_text("")
    os.utime(old, (1000, 1000))
    os.utime(loose, (1000, 1000))
    assert remove_stale_locks(git_dir, older_than=2000) == [old]
    assert not old.exists() and new.exists() and loose.exists()


def test_status_of_a_killed_run_says_stopped_not_running(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    run = make_run(tmp_path / "run")
    assert _saddler("run", str(run), "-q", fault="rollout:30").returncode == -9
    with sqlite3.connect(run / "evodag.sqlite") as conn:
        assert conn.execute("SELECT status FROM runs").fetchone() == ("running",)  # the row cannot know
    text = runner.invoke(app, ["status", str(run)])
    assert text.exit_code == 0 and text.output.splitlines()[0] == "run 1 run (opsdesk): stopped (not running)"
    doc = json.loads(runner.invoke(app, ["status", str(run), "--json"]).output)
    assert (doc["state"], doc["running"], doc["pid"]) == ("stopped", False, None)
    watch = runner.invoke(app, ["status", str(run), "--watch", "--interval", "0"])
    assert watch.exit_code == 0 and watch.output.count("stopped (not running)") == 1  # nothing to wait for


def test_rerunning_a_finished_run_changes_nothing(
    tmp_path: Path, reference: Path, make_run: Callable[..., Path]
) -> None:
    run = make_run(tmp_path / "run")
    first = _saddler("run", str(run))
    assert first.returncode == 0
    files = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (run / "report.md", run / "results.tsv")}
    best = sorted(p.name for p in (run / "best").iterdir())
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        before = (store.get_run(), len(store.events()), store.count_rollouts())
    again = _saddler("run", str(run))
    assert again.returncode == 0 and again.stdout == first.stdout
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files} == files
    assert sorted(p.name for p in (run / "best").iterdir()) == best
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert (store.get_run(), len(store.events()), store.count_rollouts()) == before
    (run / "report.md").unlink()  # a report a full disk kept from being written is written on the next run
    assert _saddler("run", str(run), "-q").returncode == 0 and (run / "report.md").is_file()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert (store.get_run(), len(store.events())) == before[:2]


def test_pause_before_the_first_run_spends_nothing_and_resume_ends_like_an_uninterrupted_run(
    tmp_path: Path, reference: Path, dag_signature: Callable[[Path], dict[str, Any]], make_run: Callable[..., Path]
) -> None:
    run = make_run(tmp_path / "run")
    assert runner.invoke(app, ["pause", str(run)]).exit_code == 0
    paused = _saddler("run", str(run), "--json")
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout)["termination"] == "paused"
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        assert store.count_rollouts() == 0 and store.count_sessions() == 0
        assert store.get_run().status == "paused"
    assert not any((run / "traces").rglob("*.json"))
    assert runner.invoke(app, ["resume", str(run)]).exit_code == 0
    assert _saddler("run", str(run), "-q").returncode == 0
    assert dag_signature(run) == dag_signature(reference)


def test_stop_then_resume_leaves_only_the_current_best_in_best(
    tmp_path: Path, reference: Path, dag_signature: Callable[[Path], dict[str, Any]], make_run: Callable[..., Path]
) -> None:
    run = make_run(tmp_path / "run")
    assert runner.invoke(app, ["stop", str(run)]).exit_code == 0
    stopped = _saddler("run", str(run), "--json")
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["termination"] == "stop_requested"
    early = json.loads((run / "best" / "EXPORT.json").read_text())["node_id"]
    assert runner.invoke(app, ["resume", str(run)]).exit_code == 0
    done = _saddler("run", str(run), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["termination"] == "max_iterations"
    final = json.loads((run / "best" / "EXPORT.json").read_text())
    assert final["node_id"] != early
    assert sorted(p.name for p in (run / "best").iterdir()) == sorted(
        ["EXPORT.json", "PR.md", "harness", final["patch"], final["bundle"]]
    )
    assert dag_signature(run) == dag_signature(reference)


def test_a_plot_draft_left_by_a_killed_run_is_removed(tmp_path: Path, make_run: Callable[..., Path]) -> None:
    """The plot helper draws while test is evaluated; a run killed then can leave its half-written draft behind
    (the helper outlives it). The next start removes it and the finished folder holds only progress.png."""
    run = make_run(tmp_path / "run", loop={"max_iterations": 1, "test_runs": 1})
    assert _saddler("run", str(run), "-q", fault="finish:1").returncode == -9
    stray = run / ".progress.png.draft-999999"
    stray.write_bytes(b"\x89PNG half")
    assert _saddler("run", str(run), "-q").returncode == 0
    assert sorted(p.name for p in run.glob("*progress.png*")) == ["progress.png"]

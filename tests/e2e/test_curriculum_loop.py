"""The loop with saturated batches and with the curriculum sampler, on `ListedFailuresBenchmark`: a harness whose
`failing.txt` names the train tasks it fails (offline diagnosis finds no patch, so the parent never changes)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evodag.cli import app as evodag_app
from evodag.store import EvoDAG
from saddler.policies.curriculum import CurriculumSampler
from saddler.policies.sampler import SamplerState
from saddler.run.folder import init_run
from saddler.run.loop import Optimizer
from saddler.sessions import registry
from saddler.sessions.offline import OfflineBackend
from saddler.sessions.schema import DiagnosisRequest, DiagnosisResult

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fakes_importable")]  # children import the fakes
HARNESS_TOML = """\
[harness]
name = "listed"

[harness.components]
capability = ["loop.py", "failing.txt"]
steering = ["prompts/**"]
protected = ["saddler.toml"]
"""


@pytest.fixture(scope="session")
def listed_run(source_repo: Callable[..., Path]) -> Callable[..., Path]:
    """`listed_run(tmp_path, failing, name="run", **tables)`: a run of the listed-failures harness (12 train tasks
    unless `benchmark_options` says otherwise); the runs of one test share one source repository, hence one
    baseline commit."""

    def make(tmp_path: Path, failing: dict[str, str], name: str = "run", **overrides: Any) -> Path:
        src = tmp_path / "src"
        if not src.exists():
            lines = "".join(f"{task} {check}\n" for task, check in failing.items())
            source_repo(
                src,
                {
                    "saddler.toml": HARNESS_TOML,
                    "loop.py": "x = 1\n",
                    "prompts/system.md": "Be careful.\n",
                    "failing.txt": lines,
                },
            )
        sets: dict[str, Any] = {
            "benchmark_options": {"n_tasks": 12},
            "loop": {"max_iterations": 4, "batch_size": 4, "test_runs": 1, "parallel_iterations": 1},  # the serial loop
            "executor": {"workers": 1},
            "policies": {"evolution": "continue"},
        }
        for key, table in overrides.items():
            sets.setdefault(key, {}).update(table)
        run = tmp_path / name
        init_run(run, harness=src, benchmark="fake_benchmarks:ListedFailuresBenchmark", overrides=sets)
        return run

    return make


def test_no_diagnosis_session_when_the_parent_passes_the_whole_batch(
    tmp_path: Path, listed_run: Callable[..., Path]
) -> None:
    run = listed_run(tmp_path, {"t-train-0": "answer"}, benchmark_options={"n_tasks": 6},
                     loop={"max_iterations": 3, "batch_size": 2}, policies={"sampler": "epoch"})  # fmt: skip
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        its = store.iterations()
        sessions = [(s.iteration, s.role) for s in store.sessions()]
    failing = [it.number for it in its if "t-train-0" in it.batch]
    assert len(failing) == 1 and sorted(t for it in its for t in it.batch) == [f"t-train-{i}" for i in range(6)]
    assert sessions == [(failing[0], "diagnosis_patch")]  # the only batch with something to diagnose
    decisions = [it.decision for it in its]
    assert decisions == ["no_patch" if it.number in failing else "no_training_failures" for it in its]
    # a saturated batch neither resets nor extends the streak of discarded attempts
    assert [it.stall_count for it in its] == [0 if it.number < failing[0] else 1 for it in its]
    history = json.loads(CliRunner().invoke(evodag_app, ["history", "--run", str(run), "--json"]).stdout)
    saturated = [h for h in history["iterations"] if h["decision"] == "no_training_failures"]
    assert [(h["batch_before"], h["candidate_id"], h["reason"]) for h in saturated] == [
        (1.0, None, "the parent passes every task of the mini-batch: nothing to diagnose")] * 2  # fmt: skip


FAILING = {"t-train-1": "event_time", "t-train-4": "event_time", "t-train-6": "event_time", "t-train-9": "answer"}


def test_curriculum_batches_pull_known_failures_and_keep_growing_coverage(
    tmp_path: Path, listed_run: Callable[..., Path]
) -> None:
    run = listed_run(tmp_path, FAILING, loop={"max_iterations": 6},
                     policies={"sampler": "curriculum", "phase_transition": "full_coverage"})  # fmt: skip
    Optimizer(run, quiet=True).run()
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        its = store.iterations()
    seen: set[str] = set()
    known_failing: set[str] = set()
    for it in its:
        assert len(it.batch) == len(set(it.batch)) == 4
        new = set(it.batch) - seen
        if known_failing:  # a pull: up to 3 known failures, the rest never-shown tasks (at least one)
            pulled = len(set(it.batch) & known_failing)
            assert pulled == min(len(known_failing), 3) and len(new) == 4 - pulled
        else:
            assert len(new) == 4
        assert it.phase == ("capability" if len(seen) < 12 else "steering")
        assert it.decision == ("no_patch" if set(it.batch) & set(FAILING) else "no_training_failures")
        seen |= set(it.batch)
        known_failing |= set(it.batch) & set(FAILING)
    assert len(seen) >= 8


class CrashOnceBackend(OfflineBackend):
    """Offline diagnosis that raises once, in iteration 4 (whose batch shows the failing t-train-1 for the first
    time), after the parent's batch rollouts were stored."""

    crashed = False

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        if request.iteration == 4 and not CrashOnceBackend.crashed:
            CrashOnceBackend.crashed = True
            raise RuntimeError("simulated crash")
        return super().diagnose_patch(request)


def test_curriculum_runs_are_deterministic_and_a_resumed_iteration_keeps_its_batch(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dag_signature: Callable[[Path], dict[str, Any]],
    listed_run: Callable[..., Path],
) -> None:
    monkeypatch.setitem(registry.BACKENDS, "crash-once", f"{__name__}:CrashOnceBackend")
    policies = {"sampler": "curriculum"}
    first = listed_run(tmp_path, FAILING, "first", policies=policies)
    Optimizer(first, quiet=True).run()
    same = listed_run(tmp_path, FAILING, "same", policies=policies)
    Optimizer(same, quiet=True).run()
    assert dag_signature(same) == dag_signature(first)
    crashed = listed_run(tmp_path, FAILING, "crashed", policies=policies, sessions={"backend": "crash-once"})
    with pytest.raises(RuntimeError, match="simulated crash"):
        Optimizer(crashed, quiet=True).run()
    with EvoDAG(crashed / "evodag.sqlite", readonly=True) as store:
        pending = store.current_iteration()
        assert pending is not None and pending.number == 4 and pending.finished_at is None
        assert store.rollouts(node_id=pending.parent_id, task_id=pending.batch[-1])  # its parent was evaluated
    drawn: list[int] = []
    real_batch = CurriculumSampler.batch

    def recording(self: CurriculumSampler, index: int, state: SamplerState | None = None) -> tuple[int, list[str]]:
        drawn.append(index)
        return real_batch(self, index, state)

    monkeypatch.setattr(CurriculumSampler, "batch", recording)
    Optimizer(crashed, quiet=True).run()
    assert drawn == []  # the pending iteration 4 reused its stored batch; there was no iteration 5 to draw
    assert dag_signature(crashed) == dag_signature(first)

"""Held-out data stays sealed from optimizer sessions at every moment of a run (issue 20, items 1-3).

Sessions query a session view of the EvoDAG (`evodag.view`) and read only part of the run folder
(`RunPaths.session_readable`). The invariant test runs every `evo-dag` subcommand the session guard allows, with
and without `--json`, whenever a session runs in a real offline run: before and after a stop and resume, after
max_iterations is raised on a finished run, and in a fork; no output may hold a test score, a dev or test trace
path, or a dev or test task (a per-task held-out result).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from evodag import cli as evodag_cli
from evodag.export import FORMATS
from evodag.store import EvoDAG
from saddler.benchmark import load_benchmark
from saddler.control import RunControls
from saddler.run.fork import fork_run
from saddler.run.loop import Optimizer
from saddler.sessions import guard

runner = CliRunner()
HELD_OUT_TRACE = re.compile(r"heldout/|traces/n\d+/(dev|test)/")
TEST_FIGURE = re.compile(r"\btest[ _:=]+(mean)?[\s\"':=]*-?\d")


@dataclass
class Spy:
    """The offline backend, reading the history the way an LLM backend does (saddler writes the session view
    before each of its sessions); `probe(role, request)` runs at the start of every session."""

    inner: Any
    probe: Callable[[str, Any], None]
    name: str = "offline"
    reads_history: bool = True

    def diagnose_patch(self, request: Any) -> Any:
        self.probe("diagnosis_patch", request)
        return self.inner.diagnose_patch(request)

    def reflect(self, request: Any) -> Any:
        self.probe("reflection", request)
        return self.inner.reflect(request)

    def evolve(self, request: Any) -> Any:
        self.probe("evolution", request)
        return self.inner.evolve(request)


@dataclass
class Probes:
    """What the spied sessions saw: (iteration, role, request) per session, and a hook run at each."""

    seen: list[tuple[int, str, Any]] = field(default_factory=list)
    hook: Callable[[str, Any], None] = lambda role, request: None

    def __call__(self, role: str, request: Any) -> None:
        self.seen.append((request.iteration, role, request))
        self.hook(role, request)


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Probes:
    import saddler.run.context as context

    found = Probes()
    real = context.load_backend
    monkeypatch.setattr(context, "load_backend", lambda cfg, **kw: Spy(real(cfg, **kw), found))
    return found


def evo_dag(request: Any, *args: str) -> Result:
    """`evo-dag ARGS` as the session runs it: `$EVODAG_DB` preset to the request's database."""
    return runner.invoke(evodag_cli.app, list(args), env={"EVODAG_DB": request.db_path})


def held_out_tasks(run_dir: Path) -> dict[str, str]:
    """The run's dev and test task ids, each with its split."""
    from saddler.config import load_run_config

    cfg = load_run_config(run_dir)
    bench = load_benchmark(cfg.benchmark, cfg.benchmark_options)
    return {t.id: split for split in ("dev", "test") for t in bench.tasks(split)}


def executed_jobs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every rollout job the run's executor is given from now on."""
    import saddler.run.context as context

    jobs: list[Any] = []
    real = context.make_executor

    class Counting:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def run(self, batch: Any, on_result: Any) -> None:
            jobs.extend(batch)
            self.inner.run(batch, on_result)

        def close(self) -> None:
            self.inner.close()

    monkeypatch.setattr(context, "make_executor", lambda cfg: Counting(real(cfg)))
    return jobs


@pytest.mark.slow
def test_test_results_of_a_stop_stay_sealed_when_the_search_resumes(
    tmp_path: Path, make_run: Callable[..., Path], probes: Probes, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = make_run(tmp_path / "r", loop={"max_iterations": 4})
    probes.hook = lambda role, request: request.iteration == 2 and RunControls(run_dir).request_stop()
    assert Optimizer(run_dir, quiet=True).run().reason == "stop_requested"
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        best = store.best_node()
        assert best is not None and best.test_mean is not None  # `saddler stop` evaluated it on test
        assert store.rollouts(node_id=best.id, split="test")
        tested_at_stop = {(n.commit, "test") for n in store.nodes() if n.test_mean is not None}
    RunControls(run_dir).clear()  # `saddler resume`
    probes.seen.clear()
    jobs = executed_jobs(monkeypatch)
    assert Optimizer(run_dir, quiet=True).run().reason == "max_iterations"
    assert not tested_at_stop & {(job.commit, job.split) for job in jobs}, "test rollouts of the stop were paid again"
    resumed = [request for _, _, request in probes.seen]
    assert resumed, "the resumed search ran no session"
    for request in resumed:
        shown = evo_dag(request, "node", str(best.id), "--json")
        assert shown.exit_code == 0, shown.output
        node = json.loads(shown.output)
        assert node["node"]["test_mean"] is None and node["node"]["test_std"] is None
        assert set(node["rollouts"]) == {"train"} or not node["rollouts"]
        assert Path(request.db_path) != run_dir / "evodag.sqlite"
        readable = [Path(p) for p in request.readable]
        assert all(not str(p).startswith(str(run_dir / "heldout")) for p in readable)
        assert not [p for root in readable if root.is_dir() for p in root.rglob("test") if p.is_dir()]


def test_sessions_see_dev_only_as_each_nodes_aggregate(
    tmp_path: Path, make_run: Callable[..., Path], probes: Probes
) -> None:
    run_dir = make_run(tmp_path / "r", loop={"max_iterations": 2})
    Optimizer(run_dir, quiet=True).run()
    dev_task = sorted(held_out_tasks(run_dir))[0]
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        assert store.rollouts(split="dev", task_id=dev_task)  # the run has per-task dev results: people see them
    request = probes.seen[-1][2]
    shown = evo_dag(request, "scenario", dev_task, "--json")
    assert shown.exit_code == 2 and "unknown task" in shown.output
    baseline = json.loads(evo_dag(request, "node", "1", "--json").output)
    assert baseline["node"]["dev_mean"] is not None  # the aggregate is there
    assert "dev" not in baseline["rollouts"]


# the invariant ----------------------------------------------------------------------------------------------


def _subcommands() -> dict[str, Any]:
    """The click commands of every `evo-dag` subcommand a session may run (the guard's allowlist)."""
    group: Any = typer.main.get_command(evodag_cli.app)
    return {name: group.commands[name] for name in guard.EVO_DAG_READS}


def _argument_lists(command: Any, store: EvoDAG, tasks: list[str]) -> list[list[str]]:
    """Every value list for `command`'s arguments this store can fill (each node, each edge, each task, ...)."""
    names = [p.name for p in command.params if p.param_type_name == "argument"]
    nodes = [str(n.id) for n in store.nodes()]
    edges = [[str(e.parent_id), str(e.child_id)] for e in store.edges()]
    pairs = [[nodes[0], nodes[-1]], [nodes[-1], nodes[0]], *edges]  # an ancestor, then the other way, each edge
    values: dict[tuple[str, ...], list[list[str]]] = {
        (): [[]],
        ("node_id",): [[n] for n in nodes],
        ("parent", "child"): [*edges, *([str(e.id)] for e in store.edges())],  # PARENT CHILD, or an edge id
        ("a", "b"): pairs,
        ("task",): [[t] for t in tasks],
    }
    key = tuple(str(n) for n in names)
    if key not in values:
        pytest.fail(f"evo-dag {command.name}: add argument values for {key} to the invariant test")
    return values[key]


def _option_lists(name: str) -> list[list[str]]:
    return [["--format", f] for f in FORMATS] if name == "export" else [[]]


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key), item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _leaks(output: str, held_out: dict[str, str], as_json: bool) -> list[str]:
    found = [f"trace path {m.group(0)!r}" for m in HELD_OUT_TRACE.finditer(output)]
    found += [f"task {t}" for t in held_out if re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", output)]
    if as_json:
        doc = json.loads(output)
        found += [f"{k} = {v}" for k, v in _walk(doc) if k.startswith("test_") and v is not None]
        found += [f"split {v}" for k, v in _walk(doc) if k == "split" and v != "train"]
    else:
        found += [f"figure {m.group(0)!r}" for m in TEST_FIGURE.finditer(output)]
    return found


def _sample(held_out: dict[str, str], split: str, k: int = 2) -> list[str]:
    return sorted(t for t, s in held_out.items() if s == split)[:k]


def check_session_surface(request: Any, held_out: dict[str, str], train_sample: list[str]) -> int:
    """Run every allowlisted subcommand (each node, edge and node pair; two dev, two test and a few train tasks; every
    export format; with and without `--json`) on what `request`'s session queries; fail on any test figure, dev or
    test trace path, or dev or test task in an output. Returns how many commands ran."""
    ran = 0
    with EvoDAG(Path(request.db_path), readonly=True) as view:
        assert Path(request.db_path) != Path(request.run_dir) / "evodag.sqlite"
        assert not [r for r in view.rollouts() if r.split != "train"]
        assert all(n.test_mean is None and n.test_std is None for n in view.nodes())
        assert view.conn.execute("SELECT count(*) FROM rollout_cache").fetchone() == (0,)
        assert not [e for e in view.events() if "test_mean" in json.dumps(e.payload)]
        asked = _sample(held_out, "dev") + _sample(held_out, "test") + train_sample
        commands = {name: (cmd, _argument_lists(cmd, view, asked)) for name, cmd in _subcommands().items()}
    for name, (_cmd, arg_lists) in commands.items():
        for args in arg_lists:
            asks_held_out = bool(set(args) & set(held_out))
            for options in _option_lists(name):
                for as_json in (False, True):
                    argv = [name, *args, *options, *(["--json"] if as_json else [])]
                    result = evo_dag(request, *argv)
                    ran += 1
                    if asks_held_out:
                        assert result.exit_code == 2 and "unknown task" in result.output, (argv, result.output)
                        continue
                    assert result.exit_code == 0, (argv, result.output)
                    leaks = _leaks(result.output, held_out, as_json)
                    assert not leaks, f"evo-dag {' '.join(argv)} shows held-out data: {leaks}"
    for root in (Path(p) for p in request.readable):
        files = [root] if root.is_file() else list(root.rglob("*")) if root.is_dir() else []
        assert not [f for f in files if HELD_OUT_TRACE.search(str(f)) or f.name == "evodag.sqlite"], root
    return ran


@pytest.mark.slow
def test_no_session_can_see_held_out_data_at_any_step_of_a_run(
    tmp_path: Path, make_run: Callable[..., Path], probes: Probes
) -> None:
    run_dir = make_run(tmp_path / "r", loop={"max_iterations": 4})
    held_out = held_out_tasks(run_dir)
    checked: dict[str, int] = {}

    def check(step: str) -> Callable[[str, Any], None]:
        iterations: set[int] = set()

        def hook(role: str, request: Any) -> None:
            if request.iteration not in iterations:  # the first session of each iteration
                iterations.add(request.iteration)
                checked[step] = checked.get(step, 0) + check_session_surface(request, held_out, request_batch(request))
            if step == "before stop" and request.iteration == 2:
                RunControls(run_dir).request_stop()

        return hook

    def request_batch(request: Any) -> list[str]:
        return [e.task_id for e in getattr(request, "evidence", [])][:3]

    probes.hook = check("before stop")
    assert Optimizer(run_dir, quiet=True).run().reason == "stop_requested"
    RunControls(run_dir).clear()
    probes.hook = check("after stop and resume")
    assert Optimizer(run_dir, quiet=True).run().reason == "max_iterations"
    config = run_dir / "saddler.toml"
    config.write_text(config.read_text().replace("max_iterations = 4", "max_iterations = 6"))
    probes.hook = check("after raising max_iterations")
    assert Optimizer(run_dir, quiet=True).run().reason == "max_iterations"
    fork_dir = tmp_path / "fork"
    fork_run(run_dir, fork_dir, 3, {"loop": {"max_iterations": 5}})
    probes.hook = check("in a fork")
    Optimizer(fork_dir, quiet=True).run()
    assert set(checked) == {"before stop", "after stop and resume", "after raising max_iterations", "in a fork"}
    assert all(checked.values())


# what a session may read of the run folder ------------------------------------------------------------------


def _run_folder(root: Path) -> tuple[Path, guard.BashPolicy]:
    """A run folder with something in every place, and the policy of a session of it."""
    files = {
        "saddler.toml": "[run]\n",
        "evodag.sqlite": "the full store",
        "report.md": "best_test: 0.98",
        "report.html": '{"test_mean": 0.98}',
        "best/EXPORT.json": '{"test_mean": 0.98}',
        "heldout/n1/test/t9-r0-s1/trace.json": "grader: expected 42",
        "heldout/n1/dev/t5-r0-s1/trace.json": "grader: expected 7",
        "traces/n1/train/t1-r0-s1/trace.json": "train trace",
        "sessions/evodag-view.sqlite": "the view",
        "worktrees/wt1/agent.py": "print(1)\n",
        "harness/agent.py": "print(1)\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "worktrees" / "wt1" / "shortcut").symlink_to(root / "heldout")
    readable = tuple(str(root / p) for p in ("saddler.toml", "harness", "worktrees", "traces", "sessions"))
    view = str(root / "sessions" / "evodag-view.sqlite")
    return root, guard.BashPolicy("", view, guard.ReadPolicy(str(root), readable))


def _decide(policy: guard.BashPolicy, cwd: Path, tool: str, **tool_input: str) -> str | None:
    out = guard.guard_decision({"tool_name": tool, "tool_input": tool_input, "cwd": str(cwd)}, None, [], policy)
    return out.get("hookSpecificOutput", {}).get("permissionDecisionReason")


def test_the_guard_lets_a_session_read_only_what_it_may_see_of_the_run_folder(tmp_path: Path) -> None:
    run, policy = _run_folder(tmp_path / "run")
    wt = run / "worktrees" / "wt1"
    for rel in ("evodag.sqlite", "report.md", "report.html", "best/EXPORT.json", "heldout/n1/test/t9-r0-s1/trace.json",
                "heldout/n1/dev/t5-r0-s1/trace.json"):  # fmt: skip
        assert "held out" in (_decide(policy, run, "Read", file_path=str(run / rel)) or ""), rel
    assert "held out" in (_decide(policy, wt, "Read", file_path="shortcut/n1/test/t9-r0-s1/trace.json") or "")
    assert "held out" in (_decide(policy, wt, "Read", file_path="../../evodag.sqlite") or "")
    for rel in ("traces/n1/train/t1-r0-s1/trace.json", "sessions/evodag-view.sqlite", "saddler.toml"):
        assert _decide(policy, run, "Read", file_path=str(run / rel)) is None, rel
    assert _decide(policy, run, "Read", file_path="/etc/hosts") is None
    assert "would search" in (_decide(policy, run, "Grep", pattern="expected") or "")  # from the run folder
    assert "would search" in (_decide(policy, wt, "Grep", pattern="x", path=str(tmp_path)) or "")  # from above it
    assert "held out" in (_decide(policy, run, "Glob", pattern="**/*.json", path="heldout") or "")
    assert "relative pattern" in (_decide(policy, wt, "Glob", pattern="../../heldout/**") or "")
    assert _decide(policy, run, "Grep", pattern="x", path="traces") is None
    assert _decide(policy, wt, "Glob", pattern="**/*.py") is None
    for command, why in (
        (f"evo-dag node 1 --db {run / 'evodag.sqlite'}", "only this session's history"),
        (f"evo-dag --run {run} summary", "--run is not allowed"),
        ("git diff --no-index a b", "--no-index"),
        ("git diff --no-ind a b", "--no-index"),
        ("git diff heldout/n1/test/t9-r0-s1/trace.json report.md", "held out"),
    ):
        assert why in (_decide(policy, run, "Bash", command=command) or ""), command
    assert _decide(policy, run, "Bash", command=f"evo-dag node 1 --json --db={policy.db}") is None
    assert _decide(policy, wt, "Bash", command="git diff HEAD -- agent.py") is None


def test_a_confined_agent_finds_nothing_held_out_in_the_run_folder(tmp_path: Path) -> None:
    import subprocess

    from saddler.sessions import confine

    ok, why = confine.bwrap_works()
    if not ok:
        pytest.skip(f"bubblewrap cannot run here: {why}")
    run, policy = _run_folder(tmp_path / "run")
    visible = [Path(p) for p in policy.reads.readable]
    script = "ls -A; cat evodag.sqlite report.md heldout/n1/test/t9-r0-s1/trace.json; cat traces/n1/train/*/trace.json"
    argv = confine.bwrap_argv(["sh", "-c", script], writable=[], readable=[], cwd=run, sealed=run, visible=visible)
    shown = subprocess.run(argv, capture_output=True, text=True, check=False)
    listed = shown.stdout.split("\n")[:5]
    assert sorted(listed) == ["harness", "saddler.toml", "sessions", "traces", "worktrees"], shown.stderr
    assert "train trace" in shown.stdout
    assert "the full store" not in shown.stdout and "0.98" not in shown.stdout and "expected" not in shown.stdout


def test_the_session_view_replaces_itself_whole(tmp_path: Path, fixture_dag: Callable[[Path], dict[str, int]]) -> None:
    from evodag.view import write_session_view

    fixture_dag(tmp_path / "evodag.sqlite")
    dest = tmp_path / "sessions" / "evodag-view.sqlite"
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / ".evodag-view.sqlite.new-99999").write_text("a killed writer's")
    with EvoDAG(tmp_path / "evodag.sqlite", readonly=True) as store:
        write_session_view(store, dest)
        first = dest.stat().st_ino
        write_session_view(store, dest)
    assert dest.stat().st_ino != first  # renamed into place: a reader holding the old file keeps reading it
    assert sorted(p.name for p in dest.parent.iterdir()) == ["evodag-view.sqlite"]
    with EvoDAG(dest, readonly=True) as view:
        assert {r.split for r in view.rollouts()} <= {"train"}
        assert all(n.test_mean is None for n in view.nodes())


def test_a_codex_session_runs_in_saddlers_bubblewrap_with_the_run_folder_sealed(
    tmp_path: Path, command_backend: Callable[..., Any], reflection_request: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """codex's own sandbox limits writes only: under `auto` saddler wraps it in bubblewrap showing only what a
    session may read of the run folder; codex itself may write its answer file and CODEX_HOME."""
    import subprocess

    from saddler.sessions import confine

    ok, why = confine.bwrap_works()
    if not ok:
        pytest.skip(f"bubblewrap cannot run here: {why}")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    run, _ = _run_folder(tmp_path / "run")
    backend = command_backend(run, "codex")
    request = reflection_request(run)
    argv, _ = backend.argv_for("reflection", request, "the prompt")
    assert argv[0] == confine.BWRAP and argv[argv.index("--tmpfs", argv.index("/tmp") + 1) + 1] == str(run)
    binds = {argv[i + 1] for i, a in enumerate(argv) if a == "--bind"}
    assert binds == {str(tmp_path / "codex-home"), str(backend.session_files("reflection", request)["result"])}
    assert argv[argv.index("--") + 1 :][:2] == ["codex", "exec"]
    # what the agent's commands would see there (codex's own sandbox inside adds limits, never removes any)
    script = "cat evodag.sqlite heldout/n1/test/t9-r0-s1/trace.json report.md; ls -A"
    probe = backend.confined(["sh", "-c", script], None, [Path(p) for p in request.readable])
    shown = subprocess.run(probe, capture_output=True, text=True, check=False, cwd=run)
    assert "the full store" not in shown.stdout and "expected" not in shown.stdout and "0.98" not in shown.stdout
    assert "evodag.sqlite" not in shown.stdout.split() and "heldout" not in shown.stdout.split()


def test_without_bubblewrap_codex_falls_back_to_its_own_sandbox_and_the_doctor_says_what_is_readable(
    tmp_path: Path, command_backend: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from saddler.sessions import confine

    monkeypatch.setattr(confine, "bwrap_works", lambda: (False, "bwrap not found"))
    backend = command_backend(tmp_path / "run", "codex")
    assert backend.sandbox == "none"
    assert "lets the agent read the run's held-out files" in backend.unsealed
    with pytest.raises(Exception, match="bubblewrap"):
        command_backend(tmp_path / "run", "codex", sandbox="bwrap").confined(["true"])

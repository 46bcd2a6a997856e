"""`init_fleet`: a fleet root from the 002 seed's fleet.json (the workdir made a clean git repo, results.tsv,
logs/, the EvoDAG and a saddler.toml so `saddler report` reads it)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from evodag.errors import UnknownRunError
from evodag.store import EvoDAG
from saddler.errors import ConfigError, RunStateError
from saddler.harness.gitcmd import git
from saddler.modes.fleet import results as tsv
from saddler.modes.fleet.config import FleetPaths, read_fleet_json
from saddler.modes.fleet.detect import detect_eval_command, write_bench_script
from saddler.run.folder import render_run_toml

IDENTITY = ["-c", "user.name=saddler", "-c", "user.email=saddler@localhost", "-c", "commit.gpgsign=false"]
EXCLUDES = (
    "logs/",
    ".orch-state.json",
    ".orch-state.tmp",
    ".paused",
    ".orch.pid",
    ".agent.pid",
    ".lock",
    "evodag.sqlite",
    "evodag.sqlite-*",
    "saddler.toml",
    "report.md",
    "__pycache__/",
    "*.pyc",
)
DEFAULT_PROGRAM = """# autoresearch: {name}

## Setup
1. Explore the codebase to understand the architecture.
2. Read `{results}` for prior experiment history.
3. Run `{eval}` to establish a baseline.

## Rules
- Goal: {direction} the metric.
- Make ONE change per experiment. Keep changes focused.
- Do not touch the eval harness.

**NEVER STOP.** Run until manually interrupted.
"""


def run_git(args: list[str], cwd: Path, check: bool = True) -> str:
    """git with a fixed identity (the workdir may have none); stripped stdout."""
    return git([*IDENTITY, *args], cwd, check=check).stdout.strip()


def _is_repo_root(path: Path) -> bool:
    proc = git(["rev-parse", "--show-toplevel"], path, check=False)
    return proc.returncode == 0 and Path(proc.stdout.strip()).resolve() == path.resolve()


def init_fleet(run_dir: Path, fleet_json: Path, *, bench_target: str | None = None) -> FleetPaths:
    """Create (or refresh) the fleet root `run_dir` from `fleet_json`; returns its paths."""
    fleet_json = Path(fleet_json).resolve()
    spec, raw = read_fleet_json(fleet_json)
    root = Path(run_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    problem = raw.setdefault("problem", {})
    if spec.problem.workdir and not Path(spec.problem.workdir).expanduser().is_absolute():
        problem["workdir"] = str((fleet_json.parent / spec.problem.workdir).resolve())
    paths = FleetPaths(
        root,
        spec.model_copy(update={"problem": spec.problem.model_copy(update={"workdir": problem.get("workdir", "")})}),
    )
    if not paths.workdir.is_dir():
        raise ConfigError(f"problem.workdir {paths.workdir} is not a folder")
    if paths.program_md() is None:
        source = fleet_json.parent / spec.problem.program_md
        target = root / spec.problem.program_md
        if source.is_file():
            shutil.copyfile(source, target)
        else:
            target.write_text(
                DEFAULT_PROGRAM.format(
                    name=spec.fleet_name,
                    results=spec.problem.results_file,
                    eval=spec.problem.eval_command or "the eval command",
                    direction=spec.problem.metric_direction,
                ),
                encoding="utf-8",
            )
    written: list[str] = []
    if not spec.problem.eval_command:
        found = detect_eval_command(paths.workdir)
        if found is None:
            if not bench_target:
                raise ConfigError(
                    "fleet.json has no problem.eval_command and no benchmark was found (Makefile "
                    "bench/benchmark/perf, package.json bench*, pytest -m benchmark, bench/): pass "
                    "--bench-target CMD to have saddler write bench.py timing CMD"
                )
            found = write_bench_script(paths.workdir, bench_target)
            written.append(found.command.split()[-1])
        problem["eval_command"] = found.command
        problem["eval_command_source"] = found.source
    (root / "fleet.json").write_text(json.dumps(raw, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths = FleetPaths.open(root)
    _prepare_git(paths.workdir, written)
    tsv.ensure_results(paths.results)
    paths.logs.mkdir(parents=True, exist_ok=True)
    options = {
        "eval_command": paths.spec.problem.eval_command,
        "metric_regex": paths.spec.problem.metric_regex,
        "metric_direction": paths.spec.problem.metric_direction,
    }
    (root / "saddler.toml").write_text(render_run_toml({
        "name": paths.spec.fleet_name, "seed": paths.spec.seed, "benchmark": "command",
        "harness": os.path.relpath(paths.workdir, root), "benchmark_options": options,
        "loop": {"max_iterations": paths.spec.stop_when.max_iterations,
                 "cost_cap_usd": paths.spec.stop_when.cost_cap_usd,
                 "plateau_threshold": paths.spec.search.plateau_threshold},
    }), encoding="utf-8")  # fmt: skip
    with EvoDAG(paths.db) as store:
        try:
            store.get_run()
        except UnknownRunError:
            store.create_run(
                {
                    "name": paths.spec.fleet_name,
                    "mode": "fleet",
                    "benchmark": "command",
                    "fleet": paths.spec.model_dump(),
                },
                paths.spec.seed,
            )
    if not paths.state.is_file():
        paths.write_state(status="initialized", iteration=0, cost_usd=0.0)
    return paths


def _prepare_git(workdir: Path, written: list[str]) -> None:
    """A git repo at the workdir with our files excluded and nothing uncommitted (reset --hard must lose nothing);
    `written` (a bench script saddler wrote) is committed as part of the fixed eval harness."""
    fresh = not _is_repo_root(workdir)
    if fresh:
        run_git(["init", "-q"], workdir)
    exclude = Path(run_git(["rev-parse", "--git-path", "info/exclude"], workdir))
    exclude = exclude if exclude.is_absolute() else workdir / exclude
    exclude.parent.mkdir(parents=True, exist_ok=True)
    current = exclude.read_text(encoding="utf-8") if exclude.is_file() else ""
    missing = [p for p in ("results.tsv", *EXCLUDES) if p not in current.splitlines()]
    if missing:
        exclude.write_text(current + "# saddler fleet\n" + "\n".join(missing) + "\n", encoding="utf-8")
    if written and not fresh:
        run_git(["add", "--", *written], workdir)
        message = "fleet: bench script written by saddler"
        run_git(["commit", "-q", "--no-verify", "-m", message, "--", *written], workdir)
    if fresh or run_git(["status", "--porcelain"], workdir):
        if not fresh:
            raise RunStateError(
                f"{workdir} has uncommitted changes; commit or stash them first (a discarded "
                "experiment is undone with git reset --hard)"
            )
        run_git(["add", "-A"], workdir)
        run_git(["commit", "-q", "--no-verify", "--allow-empty", "-m", "fleet: baseline"], workdir)


def program_warnings(paths: FleetPaths) -> list[str]:
    """What the 002 seed requires of program.md and this one lacks (it must tell the agent never to stop)."""
    program = paths.program_md()
    if program is None:
        return ["no program.md found in the workdir or the fleet root"]
    if "never stop" not in program.read_text(encoding="utf-8").lower():
        return [f"{program} does not say NEVER STOP (the seed requires it: the agent runs until interrupted)"]
    return []

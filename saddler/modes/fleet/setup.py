"""`init_fleet`: a fleet root from the 002 seed's fleet.json (the workdir made a clean git repo, results.tsv,
logs/, the EvoDAG and a saddler.toml so `saddler report` reads it)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from evodag.errors import UnknownRunError
from evodag.store import EvoDAG
from saddler.errors import ConfigError, RunStateError
from saddler.files import write_text_atomic
from saddler.harness.gitcmd import git
from saddler.modes.fleet import results as tsv
from saddler.modes.fleet.agent import FLEET_ENV
from saddler.modes.fleet.config import RESOLVED, FleetPaths, check_metric_regex, read_fleet_json
from saddler.modes.fleet.detect import detect_eval_command, metric_regex_for, write_bench_script
from saddler.modes.fleet.protect import eval_files
from saddler.procs import run_process_group
from saddler.run.folder import render_run_toml

IDENTITY = ["-c", "user.name=saddler", "-c", "user.email=saddler@localhost", "-c", "commit.gpgsign=false"]
ROOT_FILES = (  # the fleet root's own files: excluded (anchored) when the root lies inside the workdir
    "logs/",
    ".orch-state.json",
    ".orch-state.tmp",
    ".paused",
    ".orch.pid",
    ".agent.pid",
    ".lock",
    RESOLVED,
    f".{RESOLVED}.tmp-*",  # its temporary file while written (`write_text_atomic`)
    "evodag.sqlite",
    "evodag.sqlite-*",
    "saddler.toml",
    "report.md",
    "fleet.json",
    "program.md",
)
EXCLUDES = ("__pycache__/", "*.pyc")
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


def init_fleet(run_dir: Path, fleet_json: Path | None = None, *, bench_target: str | None = None) -> FleetPaths:
    """Create (or refresh) the fleet root `run_dir` from `fleet_json` (default: the root's own fleet.json, the
    seed's layout). fleet.json is never rewritten: a fleet.json from elsewhere is copied verbatim, and what init
    finds (eval command, metric_regex, protected paths) goes to FLEET/.fleet-init.json. Returns its paths."""
    root = Path(run_dir).resolve()
    fleet_json = Path(fleet_json).resolve() if fleet_json is not None else root / "fleet.json"
    spec, _ = read_fleet_json(fleet_json)  # every key and the metric_regex checked before anything is touched
    paths = FleetPaths(root, spec, base=fleet_json.parent)
    if not paths.workdir.is_dir():
        raise ConfigError(f"problem.workdir {paths.workdir} is not a folder")
    root.mkdir(parents=True, exist_ok=True)
    if fleet_json != root / "fleet.json":
        shutil.copyfile(fleet_json, root / "fleet.json")
    found: dict[str, Any] = {"base": str(fleet_json.parent), "source": str(fleet_json)}
    written: list[str] = []
    if not spec.problem.eval_command:
        detected = detect_eval_command(paths.workdir)
        if detected is None:
            if not bench_target:
                raise ConfigError(
                    "fleet.json has no problem.eval_command and no benchmark was found (Makefile "
                    "bench/benchmark/perf, package.json bench*/test, pytest -m benchmark, bench/): pass "
                    "--bench-target CMD to have saddler write bench.py timing CMD"
                )
            detected = write_bench_script(paths.workdir, bench_target)
            written.append(detected.command.split()[-1])
        found.update(eval_command=detected.command, eval_command_source=detected.source)
    command = spec.problem.eval_command or found["eval_command"]
    _write_program(paths, fleet_json, command)
    _prepare_git(paths.workdir, written, _excludes(paths))
    if not spec.problem.eval_command and not spec.problem.metric_regex:
        found.update(_metric_of(paths, command, spec.problem.metric_direction))
    if spec.problem.protected is None:
        found["protected"] = eval_files(command, paths.workdir)
    write_text_atomic(root / RESOLVED, json.dumps(found, indent=2, ensure_ascii=False) + "\n")
    paths = FleetPaths(root, spec, base=fleet_json.parent, found=found)
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
    return FleetPaths.open(root)


def _write_program(paths: FleetPaths, fleet_json: Path, command: str) -> None:
    """program.md when neither the workdir nor the root has one: the one beside fleet.json, else the template."""
    if paths.program_md() is not None:
        return
    spec = paths.spec
    source = fleet_json.parent / spec.problem.program_md
    target = paths.root / spec.problem.program_md
    if source.is_file():
        shutil.copyfile(source, target)
        return
    target.write_text(
        DEFAULT_PROGRAM.format(
            name=spec.fleet_name,
            results=spec.problem.results_file,
            eval=command,
            direction=spec.problem.metric_direction,
        ),
        encoding="utf-8",
    )


def _metric_of(paths: FleetPaths, command: str, direction: str) -> dict[str, str]:
    """Run the found benchmark once: a single number needs no metric_regex, a `name: value` line gets one."""
    env = {**os.environ, "SADDLER_BENCH_SEED": "0", FLEET_ENV: str(paths.root)}
    timeout = paths.spec.problem.eval_timeout_s
    run = run_process_group(command, shell=True, cwd=paths.workdir, env=env, timeout_s=timeout)
    if run.returncode != 0:
        why = "timed out" if run.timed_out else f"exit {run.returncode}: {run.stderr.strip()[-300:]}"
        raise ConfigError(
            f"the found benchmark `{command}` fails ({why}); fix it or set problem.eval_command in fleet.json"
        )
    guess = metric_regex_for(run.stdout, direction)
    if guess is None:
        tail = " | ".join(run.stdout.strip().splitlines()[-3:])
        raise ConfigError(
            f"the found benchmark `{command}` prints no single number and no `name: value` line "
            f"({tail or 'no output'}); set problem.metric_regex (one capture group: the metric) or "
            "problem.eval_command in fleet.json"
        )
    if not guess.regex:
        return {}
    return {
        "metric_regex": check_metric_regex(guess.regex),
        "metric_regex_source": (
            f"the benchmark's output line `{guess.line}` (of {guess.candidates} `name: value` lines)"
        ),
    }


def _excludes(paths: FleetPaths) -> list[str]:
    """gitignore patterns (anchored) for the results file and, when the fleet root is inside the workdir, the
    root's own files; plus interpreter caches."""
    out = [f"/{Path(paths.spec.problem.results_file).as_posix()}"]
    if paths.root == paths.workdir or paths.workdir in paths.root.parents:
        rel = paths.root.relative_to(paths.workdir).as_posix()
        prefix = "/" if rel == "." else f"/{rel}/"
        out += [prefix + name for name in (*ROOT_FILES, paths.spec.problem.program_md)]
    return [*dict.fromkeys([*out, *EXCLUDES])]


def _prepare_git(workdir: Path, written: list[str], excludes: list[str]) -> None:
    """A git repo at the workdir with our files excluded and nothing uncommitted (reset --hard must lose nothing):
    the results file (`excludes[0]`), whatever its name, is excluded and, if the user's repo tracked it,
    untracked (its content kept); `written` (a bench script saddler wrote) is committed as part of the eval."""
    results_file = excludes[0].lstrip("/")
    fresh = not _is_repo_root(workdir)
    if fresh:
        run_git(["init", "-q"], workdir)
    exclude = Path(run_git(["rev-parse", "--git-path", "info/exclude"], workdir))
    exclude = exclude if exclude.is_absolute() else workdir / exclude
    exclude.parent.mkdir(parents=True, exist_ok=True)
    current = exclude.read_text(encoding="utf-8") if exclude.is_file() else ""
    missing = [p for p in excludes if p not in current.splitlines()]
    if missing:
        exclude.write_text(current + "# saddler fleet\n" + "\n".join(missing) + "\n", encoding="utf-8")
    if fresh:
        run_git(["add", "-A"], workdir)
        run_git(["commit", "-q", "--no-verify", "--allow-empty", "-m", "fleet: baseline"], workdir)
        return
    if run_git(["status", "--porcelain", "--", ".", *(f":!{w}" for w in written)], workdir):
        raise RunStateError(
            f"{workdir} has uncommitted changes; commit or stash them first (a discarded "
            "experiment is undone with git reset --hard)"
        )
    if run_git(["ls-files", "--", results_file], workdir):
        run_git(["rm", "-q", "--cached", "--", results_file], workdir)
        message = f"fleet: stop tracking {results_file} (the fleet's log stays out of git)"
        run_git(["commit", "-q", "--no-verify", "-m", message], workdir)  # the tree is clean: only the removal
    if written:
        run_git(["add", "--", *written], workdir)
        run_git(
            ["commit", "-q", "--no-verify", "-m", "fleet: bench script written by saddler", "--", *written], workdir
        )


def program_warnings(paths: FleetPaths) -> list[str]:
    """What the 002 seed requires of program.md and this one lacks (it must tell the agent never to stop)."""
    program = paths.program_md()
    if program is None:
        return ["no program.md found in the workdir or the fleet root"]
    if "never stop" not in program.read_text(encoding="utf-8").lower():
        return [f"{program} does not say NEVER STOP (the seed requires it: the agent runs until interrupted)"]
    return []


def init_summary(paths: FleetPaths) -> dict[str, Any]:
    """What `init_fleet` set up and found, as `saddler fleet init --json` prints it: root, workdir, eval command,
    metric_regex (and where each was found when init detected it), results file, protected paths, the provider's
    notes and program.md's warnings."""
    from saddler.modes.fleet.agent import provider_notes

    problem = paths.spec.problem
    detected = {
        key: paths.found[f"{key}_source"] for key in ("eval_command", "metric_regex") if f"{key}_source" in paths.found
    }
    return {
        "root": str(paths.root),
        "workdir": str(paths.workdir),
        "eval_command": problem.eval_command,
        "metric_regex": problem.metric_regex,
        "detected": detected,
        "results": str(paths.results),
        "protected": paths.protected,
        "notes": provider_notes(paths.spec.config),
        "warnings": program_warnings(paths),
    }


def render_init_summary(info: dict[str, Any]) -> str:
    """`init_summary` as the lines `saddler fleet init` prints (the warnings apart: they go to stderr)."""
    detected = info["detected"]
    return "\n".join(
        [
            f"fleet ready: {info['root']}",
            f"  workdir    {info['workdir']}",
            f"  eval       `{info['eval_command']}`"
            + (f" (found: {detected['eval_command']})" if "eval_command" in detected else ""),
            f"  metric     {info['metric_regex'] or 'the single number the eval prints'}"
            + (f" (from {detected['metric_regex']})" if "metric_regex" in detected else ""),
            f"  results    {info['results']} (git-excluded, never reset)",
            f"  protected  {', '.join(info['protected']) or 'nothing'} (an agent change to these is a crash)",
            *(f"  note: {note}" for note in info["notes"]),
            f"start it with `saddler fleet run {info['root']}`",
        ]
    )

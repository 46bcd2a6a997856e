"""`saddler init | run | fork | minimize | status | pause | resume | stop | report | eval | export`: thin wrappers
over the library."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from saddler.cli.common import INTERRUPTED, fail, handle_errors, print_json
from saddler.control import RunControls
from saddler.run.folder import RunPaths

if TYPE_CHECKING:
    from saddler.run.finish import RunOutcome

RUN_DIR = typer.Argument(..., help="the run folder")


def _parse_sets(values: list[str]) -> dict[str, Any]:
    """`loop.max_iterations=10` -> {"loop": {"max_iterations": 10}} (values parsed as TOML, else strings)."""
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            fail(f"--set {item!r}: expected KEY=VALUE, e.g. loop.max_iterations=10", 2)
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        *parents, leaf = key.split(".")
        table = out
        for part in parents:
            table = table.setdefault(part, {})
        table[leaf] = value
    return out


def _require_run(run_dir: Path) -> RunPaths:
    paths = RunPaths(Path(run_dir))
    if not paths.config.is_file():
        fail(f"{run_dir} is not a run folder (no saddler.toml); create one with `saddler init`", 2)
    return paths


def _require_db(run_dir: Path) -> RunPaths:
    paths = _require_run(run_dir)
    if not paths.db.is_file():
        fail(f"{run_dir} has not run yet (no evodag.sqlite); start it with `saddler run {run_dir}`", 2)
    return paths


def _run(run_dir: Path, quiet: bool, json_out: bool, allow_changed: bool) -> RunOutcome:
    """`Optimizer(run_dir).run()` with the progress printed (unless quiet) and the sandbox warning."""
    from rich.console import Console

    from saddler.run.loop import Optimizer

    console = Console(stderr=True, highlight=False)
    say = (lambda _t: None) if quiet or json_out else (lambda text: console.print(text, markup=False, soft_wrap=True))
    _warn_about_sandbox(run_dir, console, json_out)
    return Optimizer(run_dir, quiet=quiet or json_out, say=say, allow_changed=allow_changed).run()


def register(app: typer.Typer) -> None:
    @app.command()
    @handle_errors
    def init(
        run_dir: Path = RUN_DIR,
        template: str = typer.Option(None, "--template", "-t", help="a bundled template (see `saddler list`)"),
        harness: Path = typer.Option(None, "--harness", help="your harness git repo (cloned; never modified)"),
        benchmark: str = typer.Option(None, "--benchmark", "-b", help="benchmark name (default: the template's)"),
        backend: str = typer.Option("offline", "--backend", help="offline | claude | command"),
        seed: int = typer.Option(0, "--seed"),
        sets: list[str] = typer.Option([], "--set", help="override a [run] key: loop.max_iterations=10"),
        force: bool = typer.Option(False, "--force", help="replace an existing run folder"),
        from_fleet: Path = typer.Option(None, "--from-fleet", help="an autoresearch fleet.json: make a fleet root"),
        include_uncommitted: bool = typer.Option(
            False, "--include-uncommitted", help="commit the harness's uncommitted changes as the run's baseline"
        ),
        warm_start: Path = typer.Option(
            None, "--warm-start", help="another run of this harness and benchmark: start from its history"
        ),
    ) -> None:
        """Make a run folder: the run's own harness clone and its saddler.toml (or a fleet root, --from-fleet)."""
        from saddler.run.folder import init_run

        if from_fleet is not None:  # `saddler fleet init DIR --from-fleet FILE`, the one way to create a fleet
            from saddler.cli.setup import create_fleet

            create_fleet(run_dir, from_fleet, bench_target=None, json_out=False)
            return

        path = init_run(
            run_dir,
            template=template,
            harness=harness,
            benchmark=benchmark,
            backend=backend,
            seed=seed,
            force=force,
            overrides=_parse_sets(sets),
            include_uncommitted=include_uncommitted,
            warm_start=warm_start,
            say=typer.echo,
        )
        typer.echo(f"created {path}")

    @app.command()
    @handle_errors
    def run(
        run_dir: Path = RUN_DIR,
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output; only the final summary"),
        json_out: bool = typer.Option(False, "--json", help="print the final summary as JSON"),
        allow_changed: bool = typer.Option(
            False, "--allow-changed", help="resume although results-affecting inputs changed (recorded as an event)"
        ),
    ) -> None:
        """Run the optimization, or resume it from where it stopped (refused, exit 2, when its inputs changed)."""
        _require_run(run_dir)
        try:
            outcome = _run(run_dir, quiet, json_out, allow_changed)
        except KeyboardInterrupt:
            fail(f"interrupted; `saddler run {run_dir}` resumes where it stopped", INTERRUPTED)
        if json_out:
            print_json(
                {
                    "termination": outcome.reason,
                    "best_node": outcome.best_node,
                    "best_dev": outcome.best_dev,
                    "baseline_test": outcome.baseline_test,
                    "best_test": outcome.best_test,
                    "rollouts": outcome.rollouts,
                    "report": str(outcome.report) if outcome.report else None,
                    "score": outcome.score,
                    "metric": outcome.metric,
                    "baseline_test_metric": outcome.baseline_test_metric,
                    "best_test_metric": outcome.best_test_metric,
                    "delta_test_ci95": list(outcome.delta_test_ci95) if outcome.delta_test_ci95 else None,
                    "minimized": outcome.minimized.to_json() if outcome.minimized else None,
                    "minimized_test": outcome.minimized_test,
                }
            )
        else:
            for line in outcome.metric_lines():
                typer.echo(line)

    @app.command()
    @handle_errors
    def fork(
        run_dir: Path = RUN_DIR,
        new_dir: Path = typer.Argument(..., help="the new run folder (must not exist, or be empty)"),
        from_iteration: int = typer.Option(..., "--from-iteration", min=0, help="keep iterations 1..N (0: baseline)"),
        sets: list[str] = typer.Option([], "--set", help="change a [run] key in the fork: policies.phases=none"),
        json_out: bool = typer.Option(False, "--json"),
    ) -> None:
        """Branch a run: a new run folder with its history up to iteration N (nothing paid twice), run on its own."""
        from saddler.run.fork import fork_run

        _require_db(run_dir)
        info = fork_run(run_dir, new_dir, from_iteration, _parse_sets(sets))
        if json_out:
            print_json(info)
        else:
            changed = f"; changed: {', '.join(info['changed'])}" if info["changed"] else ""
            typer.echo(
                f"forked {run_dir} at iteration {from_iteration} into {new_dir} ({info['nodes']} nodes, "
                f"{info['rollouts']} rollouts, {info['sessions']} sessions kept{changed}); "
                f"continue it with `saddler run {new_dir}`"
            )

    @app.command()
    @handle_errors
    def minimize(
        run_dir: Path = RUN_DIR,
        node: int = typer.Option(None, "--node", help="node id (default: the run's best)"),
        json_out: bool = typer.Option(False, "--json"),
    ) -> None:
        """Cut a node down to the changes that carry their weight on dev (each removal a node; nothing paid twice)."""
        from saddler.run.minimize import minimize_run

        paths = _require_db(run_dir)
        result = minimize_run(paths.root, node, say=None if json_out else typer.echo)
        if json_out:
            print_json(result.to_json() if result is not None else None)
        elif result is None:
            typer.echo("nothing to minimize: the node is the baseline, or the run evaluates no dev (dev_eval = never)")
        else:
            typer.echo(
                f"minimized: {result.summary()}, node {result.node} ({result.rollouts} rollouts, {result.stopped})"
            )

    @app.command()
    @handle_errors
    def status(
        run_dir: Path = RUN_DIR,
        watch: bool = typer.Option(False, "--watch", "-w", help="refresh until the run finishes (Ctrl-C to leave)"),
        interval: float = typer.Option(2.0, "--interval"),
        json_out: bool = typer.Option(False, "--json"),
    ) -> None:
        """Where the run is: iteration, phase, best node, rollouts, cost, stalls."""
        from evodag.store import EvoDAG
        from saddler.reporting.status import render_status, status_snapshot

        paths = _require_db(run_dir)
        while True:
            with EvoDAG(paths.db, readonly=True) as store:
                snap = status_snapshot(store, paths.root)
            if json_out:
                print_json(snap)
            else:
                typer.echo(render_status(snap))
            if not watch or not snap["running"]:  # finished, paused or stopped: nothing more will change
                return
            time.sleep(interval)
            typer.echo("")

    @app.command()
    @handle_errors
    def pause(run_dir: Path = RUN_DIR) -> None:
        """Pause at the next iteration boundary (writes RUN/PAUSE)."""
        RunControls(_require_run(run_dir).root).request_pause()
        typer.echo("pause requested: the run stops at the next iteration boundary")

    @app.command()
    @handle_errors
    def resume(run_dir: Path = RUN_DIR) -> None:
        """Clear PAUSE/STOP; then `saddler run DIR` continues where the run stopped."""
        controls = RunControls(_require_run(run_dir).root)
        controls.clear()
        if controls.running():
            typer.echo("resumed: the run goes on")
        else:
            typer.echo(f"resumable: run `saddler run {run_dir}` to continue")

    @app.command()
    @handle_errors
    def stop(run_dir: Path = RUN_DIR) -> None:
        """Stop at the next iteration boundary and finish (test evaluation, export, report)."""
        RunControls(_require_run(run_dir).root).request_stop()
        typer.echo("stop requested: the run finishes after the current iteration")

    @app.command()
    @handle_errors
    def kill(
        run_dir: Path = RUN_DIR,
        json_out: bool = typer.Option(False, "--json"),
        grace_s: float = typer.Option(10.0, "--grace", help="seconds before SIGTERM becomes SIGKILL"),
    ) -> None:
        """End the process running DIR now (SIGTERM, then SIGKILL); `saddler run DIR` resumes it later."""
        killed = RunControls(_require_run(run_dir).root).kill(grace_s)
        if json_out:
            print_json({"killed": killed})
        else:
            typer.echo(f"killed process {killed[0]}" if killed else "not running: nothing to kill")

    @app.command()
    @handle_errors
    def report(run_dir: Path = RUN_DIR, json_out: bool = typer.Option(False, "--json")) -> None:
        """(Re)write report.md, results.tsv and progress.png from the EvoDAG."""
        from evodag.store import EvoDAG
        from saddler.reporting.figures import build_report, write_report
        from saddler.reporting.results_tsv import write_results_tsv

        paths = _require_db(run_dir)
        with EvoDAG(paths.db, readonly=True) as store:
            if store.get_run().config.get("mode") != "fleet":  # a fleet's results.tsv is its own log
                write_results_tsv(store, paths.root / "results.tsv")
            path = write_report(store, paths.root)
            if json_out:
                print_json(build_report(store))
            else:
                typer.echo(f"report: {path}")

    @app.command("eval")
    @handle_errors
    def eval_(
        run_dir: Path = RUN_DIR,
        node: int = typer.Option(..., "--node", help="node id (see `evo-dag summary`)"),
        split: str = typer.Option("dev", "--split", help="dev | test"),
        runs: int = typer.Option(3, "--runs", min=1),
        json_out: bool = typer.Option(False, "--json"),
    ) -> None:
        """Evaluate one node on dev or test, k runs: the run's score (Pass@1 or mean score), mean ± std."""
        from saddler.run.ops import evaluate_node

        if split not in ("dev", "test"):
            fail(f"--split {split!r}: expected dev or test", 2)
        result = evaluate_node(_require_run(run_dir).root, node, split, runs)
        if json_out:
            print_json(result)
        else:
            label = "Pass@1" if result["score"] == "pass_rate" else "mean score"
            typer.echo(
                f"node {node} {split} {label}: {result['mean']:.4f} ± {result['std']:.4f} "
                f"over {runs} run(s) {result['runs']} ({result['executed']} rollouts executed)"
            )

    @app.command()
    @handle_errors
    def export(
        run_dir: Path = RUN_DIR,
        node: int = typer.Option(None, "--node", help="node id (default: the run's best, minimized when measured)"),
        to: Path = typer.Option(None, "--to", help="destination folder (tree, patch, bundle)"),
        branch: str = typer.Option(None, "--branch", help="write a branch, one commit per kept change, and PR.md"),
        repo: Path = typer.Option(None, "--repo", help="--branch into this repository (default: the run's clone)"),
        open_pr: bool = typer.Option(False, "--open-pr", help="--branch: open the pull request with the gh CLI"),
        json_out: bool = typer.Option(False, "--json"),
    ) -> None:
        """Export a node: clean harness tree, a patch against the baseline, a git bundle (--to); or a branch of
        one commit per kept change and its PR.md (--branch), optionally opened as a pull request (--open-pr)."""
        from saddler.run.ops import export_node

        if (to is None) == (branch is None):
            fail("give exactly one of --to DIR or --branch NAME", 2)
        if branch is None and (repo is not None or open_pr):
            fail("--repo and --open-pr go with --branch NAME", 2)
        if branch is not None:
            from saddler.run.handoff import export_branch

            done = export_branch(_require_db(run_dir).root, branch, repo=repo, node_id=node, open_pr=open_pr)
            if json_out:
                print_json(done.to_json())
            else:
                what = "minimized " if done.minimized else ""
                typer.echo(
                    f"wrote branch {done.branch} ({len(done.commits)} commit(s), {what}node {done.node_id}) in "
                    f"{done.repo}; PR description {done.pr_md}"
                    + (f"; pull request {done.pr_url}" if done.pr_url else "")
                )
            return
        info = export_node(_require_db(run_dir).root, node, to)
        if json_out:
            print_json(info)
        else:
            typer.echo(f"exported node {info.get('node_id')} to {to}")


def _warn_about_sandbox(run_dir: Path, console: Any, json_out: bool) -> None:
    """Say loudly, before anything runs, what the rollouts' sandbox does not contain (the doctor says it too);
    a sandbox asked for by name that this machine lacks stops the run here."""
    from saddler.config import load_run_config
    from saddler.executor.sandbox import resolve_sandbox

    warning = resolve_sandbox(load_run_config(run_dir).executor).warning()
    if warning and not json_out:
        console.print(f"warning: {warning}", markup=False, style="bold", soft_wrap=True)

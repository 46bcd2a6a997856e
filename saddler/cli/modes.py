"""`saddler skill ...` (SKILL.md autoresearch) and `saddler fleet ...` (autoresearch fleets): the seed workflows."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import typer

from saddler.cli.common import handle_errors, print_json

skill_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=None, help="SKILL.md autoresearch (mutate -> evaluate -> keep/discard)."
)
fleet_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=None, help="Autoresearch fleets: one metric, git as the state machine."
)
FLEET_DIR = typer.Argument(..., help="the fleet root (fleet.json, program.md, logs/)")


def _tty() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


@skill_app.command("run")
@handle_errors
def skill_run(
    skill_dir: Path = typer.Argument(..., help="the skill folder (SKILL.md, EVAL.md)"),
    workspace: Path = typer.Option(None, "--workspace", "-w", help="default: {repo-root}/{skill-name}-autoresearch"),
    evals: Path = typer.Option(None, "--evals", help="evals.json (default: {skill-name}-workspace/evals/)"),
    backend: str = typer.Option("offline", "--backend", help="offline (stand-ins) | claude"),
    max_iterations: int = typer.Option(10, "--max-iterations"),
    target_pass_rate: float = typer.Option(1.0, "--target-pass-rate"),
    stall_limit: int = typer.Option(3, "--stall-limit"),
    eval_runs: int = typer.Option(2, "--eval-runs"),
    seed: int = typer.Option(0, "--seed"),
    auto_approve_neutral: bool = typer.Option(False, "--auto-approve-neutral"),
    apply: str = typer.Option(None, "--apply", help="yes | no | diff (asked on a terminal; otherwise no)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="start without confirming the settings"),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    """Improve SKILL.md against its evals.json; the original changes only when you apply (yes)."""
    from saddler.modes.skill.apply import apply_best, skill_diff
    from saddler.modes.skill.loop import SkillRun
    from saddler.modes.skill.program import SkillOptions

    opts = SkillOptions(
        max_iterations=max_iterations,
        target_pass_rate=target_pass_rate,
        stall_limit=stall_limit,
        eval_runs=eval_runs,
        auto_approve_neutral=auto_approve_neutral,
        seed=seed,
        backend=backend,
    )

    def approve(diff: str) -> bool:
        if not _tty():
            return False
        typer.echo(diff)
        return typer.confirm("NEUTRAL mutation (same pass rate, program.md strategy): keep it?", default=False)

    say = (lambda _t: None) if json_out else typer.echo
    run = SkillRun(skill_dir, workspace, opts, evals=evals, approve=approve, say=say)
    if not json_out:
        strategy = "program.md" if (run.ws.root / "program.md").is_file() else "Default"
        typer.echo(
            f"Autoresearch 설정:\n- 대상: {run.skill_md}\n- Eval: {len(run.suite.evals)}개 케이스, "
            f"{run.suite.assertion_count()}개 assertions\n- 예산: max {max_iterations} iterations\n"
            f"- 목표: pass_rate ≥ {target_pass_rate}\n- 전략: "
            f"{strategy}\n- Workspace: {run.ws.root}"
        )
        if _tty() and not yes and not typer.confirm("시작하시겠습니까? (start?)", default=True):
            raise typer.Exit(1)
    outcome = run.run()
    choice = apply or "no"
    if apply is None and _tty() and not json_out and outcome.best_text != outcome.original_text:
        while True:
            choice = typer.prompt("최종 SKILL.md를 원본에 반영하시겠습니까? yes / no / diff", default="no")
            if choice != "diff":
                break
            typer.echo(skill_diff(outcome) or "(no change)")
    result = apply_best(outcome, choice)
    if json_out:
        print_json(
            {
                **outcome.summary(),
                "apply": {
                    "choice": result.choice,
                    "applied": result.applied,
                    "commit": result.commit,
                    "message": result.message,
                },
            }
        )
    else:
        typer.echo(
            f"Pass rate: {outcome.baseline_pass_rate:.2f} -> {outcome.final_pass_rate:.2f} "
            f"({outcome.kept} kept, {outcome.discarded} discarded; {outcome.termination_reason})"
        )
        typer.echo(result.message)


@skill_app.command("report")
@handle_errors
def skill_report(workspace: Path = typer.Argument(..., help="a skill-mode workspace")) -> None:
    """Re-render and print W/report.md from the workspace's files."""
    from saddler.modes.skill.workspace import report_from_files

    text = report_from_files(workspace)
    (Path(workspace) / "report.md").write_text(text, encoding="utf-8")
    typer.echo(text, nl=False)


@fleet_app.command("init")
@handle_errors
def fleet_init(
    run_dir: Path = FLEET_DIR,
    from_fleet: Path = typer.Option(None, "--from-fleet", help="the seed's fleet.json (default: DIR/fleet.json)"),
    bench_target: str = typer.Option(None, "--bench-target", help="command bench.py times when no eval is found"),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    """Create the fleet root from fleet.json (git init of the workdir, results.tsv, logs/, EvoDAG); fleet.json
    itself is never rewritten."""
    from saddler.cli.setup import create_fleet  # `saddler init DIR --from-fleet FILE` calls it too

    create_fleet(run_dir, from_fleet, bench_target=bench_target, json_out=json_out)


@fleet_app.command("run")
@handle_errors
def fleet_run(
    run_dir: Path = FLEET_DIR,
    detach: bool = typer.Option(False, "--detach", help="run in the background (logs/orchestrator.log)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the next iteration's agent command and prompt"),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    """Run the loop until max_iterations / cost_cap_usd (pause, resume and kill work while it runs)."""
    from saddler.modes.fleet.config import FleetPaths
    from saddler.modes.fleet.loop import FleetRun, next_session

    if dry_run:
        plan = next_session(FleetPaths.open(run_dir))
        stdin = f" < {plan['stdin']}" if plan["stdin"] else ""
        print_json(plan) if json_out else typer.echo(f"$ {shlex.join(plan['argv'])}{stdin}\n\n{plan['prompt']}")
        return

    if detach:
        paths = FleetPaths.open(run_dir)
        paths.logs.mkdir(parents=True, exist_ok=True)
        with (paths.logs / "orchestrator.log").open("a") as log:
            proc = subprocess.Popen(
                [sys.executable, "-c", "from saddler.cli.app import app; app()", "fleet", "run", str(paths.root)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        typer.echo(f"started in the background (pid {proc.pid}); `saddler fleet status {paths.root} --watch`")
        return
    state = FleetRun(run_dir, say=(lambda _t: None) if json_out else typer.echo).run()
    if json_out:
        print_json(state)


@fleet_app.command("status")
@handle_errors
def fleet_status(
    run_dir: Path = FLEET_DIR,
    watch: bool = typer.Option(False, "--watch", help="refresh until the fleet stops (Ctrl-C to leave)"),
    interval: float = typer.Option(5.0, "--interval"),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    """Iteration, best metric, results.tsv, cost and plateau state."""
    from saddler.modes.fleet import ops as fleet_ops
    from saddler.modes.fleet.config import FleetPaths

    paths = FleetPaths.open(run_dir)
    while True:
        info = fleet_ops.status(paths)
        print_json(info) if json_out else typer.echo(fleet_ops.render_status(info) + "\n")
        if not watch or not info["running"]:
            return
        time.sleep(interval)


@fleet_app.command("view")
@handle_errors
def fleet_view(
    run_dir: Path = FLEET_DIR,
    iteration: str = typer.Argument("latest", help="N or latest"),
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing events until the session ends"),
) -> None:
    """The parsed session log of one iteration."""
    from saddler.modes.fleet import ops as fleet_ops
    from saddler.modes.fleet.config import FleetPaths

    paths = FleetPaths.open(run_dir)
    if follow:
        fleet_ops.follow(paths, iteration, typer.echo)
    else:
        typer.echo(fleet_ops.view(paths, iteration), nl=False)


@fleet_app.command("report")
@handle_errors
def fleet_report(run_dir: Path = FLEET_DIR, output: Path = typer.Option(None, "--output", "-o")) -> None:
    """Write the Markdown summary (default FLEET/report.md) and print its path."""
    from saddler.modes.fleet import ops as fleet_ops
    from saddler.modes.fleet.config import FleetPaths

    paths = FleetPaths.open(run_dir)
    target = output or paths.root / "report.md"
    target.write_text(fleet_ops.report(paths), encoding="utf-8")
    typer.echo(f"report: {target}")


def _op(name: str, doc: str) -> None:
    @fleet_app.command(name, help=doc)
    @handle_errors
    def command(run_dir: Path = FLEET_DIR) -> None:
        from saddler.modes.fleet import ops as fleet_ops
        from saddler.modes.fleet.config import FleetPaths

        result = getattr(fleet_ops, name)(FleetPaths.open(run_dir))
        print_json(result) if isinstance(result, dict) else typer.echo(result)


_op("pause", "Pause at the next iteration boundary.")
_op("resume", "Resume a paused fleet.")
_op("kill", "Force-stop: the orchestrator, the agent, and orphan processes of this fleet.")


def register(app: typer.Typer) -> None:
    """Add the `skill` and `fleet` command groups to `app`."""
    app.add_typer(skill_app, name="skill")
    app.add_typer(fleet_app, name="fleet")

"""Fleet mode: the 002 seed's single-metric autoresearch loop, with git as the state machine.

`init_fleet(run_dir, fleet_json)` takes the seed's fleet.json as it is (eval command detected or a bench.py
written when absent), makes the workdir a clean git repo, creates results.tsv, logs/ and the EvoDAG.
`FleetRun(run_dir).run()` loops: count trailing discards in results.tsv (code, not the agent); at the plateau
threshold the search prompt is used; the agent makes ONE change; saddler commits it, runs the fixed eval with
a fresh SADDLER_BENCH_SEED, keeps the commit on a strict improvement (the `metric_keep` policy,
`saddler.policies.seed_acceptance`) and `git reset --hard`s otherwise, appends the results.tsv row and records
everything in the EvoDAG. Stops on max_iterations or cost_cap_usd (`policies.stopping.budget_spent`); waits at
iteration boundaries while `.paused` exists. saddler evaluates itself rather than trusting the agent's report.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.command.metric import EvalRun, run_eval
from evodag.models import Node
from evodag.store import EvoDAG
from saddler.errors import RunStateError
from saddler.modes.fleet import results as tsv
from saddler.modes.fleet.agent import (
    FLEET_ENV,
    SessionRun,
    agent_argv,
    build_prompt,
    description,
    retries_with_fallback,
    run_session,
    shown_argv,
)
from saddler.modes.fleet.config import FleetPaths
from saddler.modes.fleet.protect import protected_changes
from saddler.modes.fleet.setup import init_fleet, run_git
from saddler.policies.seed_acceptance import MetricKeep
from saddler.policies.stopping import budget_spent
from saddler.run.folder import run_lock

Say = Callable[[str], None]
__all__ = ["FleetRun", "init_fleet", "next_session"]


def next_session(paths: FleetPaths) -> dict[str, Any]:
    """What the next iteration would run (the seed's `launch.sh --dry-run`): its number, search flag, argv, prompt."""
    with EvoDAG(paths.db, readonly=True) as store:
        n = len(store.iterations()) + 1
        rows = tsv.recorded(store)
    discards = tsv.trailing_discards(rows)
    search = paths.spec.search.enabled and discards >= paths.spec.search.plateau_threshold
    prompt = build_prompt(paths, n, discards, search, [r.line() for r in rows])
    argv, stdin = agent_argv(paths, prompt, paths.logs / f"prompt-iter-{n}.md")
    return {"iteration": n, "search": search, "argv": shown_argv(argv, prompt), "stdin": stdin, "prompt": prompt}


class FleetRun:
    """The fleet loop over one fleet root (see the module docstring). `sleep` is used while paused."""

    def __init__(
        self, run_dir: Path, *, say: Say | None = None, sleep: Callable[[float], None] = time.sleep, poll_s: float = 5.0
    ) -> None:
        self.paths = FleetPaths.open(run_dir)
        self.spec = self.paths.spec
        self.say: Say = say or (lambda _t: None)
        self.sleep, self.poll_s = sleep, poll_s

    def run(self) -> dict[str, Any]:
        paths = self.paths
        with run_lock(paths.root), EvoDAG(paths.db) as store:
            paths.pid.write_text(str(os.getpid()), encoding="utf-8")
            try:
                run_id = store.get_run().id
                store.update_run(run_id, status="running", finished_at=None, termination_reason=None)
                paths.write_state(status="running", pid=os.getpid(), started_at=store.clock())
                reason = self._loop(store, run_id)
                best = store.get_run(run_id).best_node_id
                store.update_run(
                    run_id, status="finished", termination_reason=reason, finished_at=store.clock(), best_node_id=best
                )
                return paths.write_state(status="finished", termination_reason=reason, pid=None)
            finally:
                paths.pid.unlink(missing_ok=True)

    def _eval(self, iteration: int) -> tuple[EvalRun, int]:
        seed = random.Random(f"{self.spec.seed}:bench:{iteration}").randrange(2**31)  # fresh inputs every run
        result = run_eval(
            self.spec.problem.eval_command,
            self.paths.workdir,
            seed,
            self.spec.problem.metric_regex,
            self.spec.problem.eval_timeout_s,
            {FLEET_ENV: str(self.paths.root)},
        )
        (self.paths.logs / f"eval-iter-{iteration}.txt").write_text(
            f"$ {self.spec.problem.eval_command}  (SADDLER_BENCH_SEED={seed})\n{result.stdout}\n--- stderr ---\n"
            f"{result.stderr}\n--- metric: {result.metric} {result.error}\n",
            encoding="utf-8",
        )
        return result, seed

    def _rollout(self, store: EvoDAG, run_id: int, node: Node, n: int, result: EvalRun, seed: int, ok: bool) -> None:
        store.add_rollout(
            run_id=run_id,
            node_id=node.id,
            task_id="metric",
            split="train",
            seed=seed,
            repetition=0,
            score=result.metric if result.metric is not None else 0.0,
            passed=ok,
            disposition="success" if result.metric is not None else "task_failure",
            duration_s=round(result.duration_s, 3),
            error_tail=result.error,
            task_group="metric",
            trace_path=str(self.paths.logs / f"eval-iter-{n}.txt"),
            cache_key=f"fleet:{node.commit}:{n}",
        )

    def _baseline(self, store: EvoDAG, run_id: int) -> Node:
        """The node to continue from: the best kept one after a restart, else the freshly measured baseline."""
        run = store.get_run(run_id)
        if run.baseline_node_id is not None:
            return self._recover(store, run_id, store.get_node(run.best_node_id or run.baseline_node_id))
        head = run_git(["rev-parse", "HEAD"], self.paths.workdir)
        result, seed = self._eval(0)
        if result.metric is None:
            raise RunStateError(
                f"the eval command fails on the baseline ({result.error}); fix "
                f"`{self.spec.problem.eval_command}` (see logs/eval-iter-0.txt) before running"
            )
        node = store.add_node(
            run_id, head, None, 0, "none", "baseline", "baseline", status="baseline", status_reason="baseline"
        )
        node = store.update_node(node.id, batch_after=result.metric)
        self._rollout(store, run_id, node, 0, result, seed, True)
        row = tsv.ResultRow(head[:7], result.metric, "keep", "baseline")
        with store.transaction():
            store.update_run(run_id, baseline_node_id=node.id, best_node_id=node.id)
            self._log_row(store, run_id, 0, row)
        tsv.append_result(self.paths.results, row)
        self.paths.write_state(baseline_metric=result.metric, best_metric=result.metric)
        self.say(f"baseline: {result.metric:g}")
        return node

    def _recover(self, store: EvoDAG, run_id: int, best: Node) -> Node:
        """After a kill: close the interrupted iteration (its candidate undecided -> crash) and put the workdir
        back on the best kept commit, dropping whatever the interrupted experiment left (committed or not)."""
        wd = self.paths.workdir
        self._restore_rows(store, run_id)
        moved = not self._at(best.commit)
        current = store.current_iteration(run_id)
        if current is not None and current.finished_at is None:
            for node in store.nodes(run_id, status="pending"):
                store.update_node(node.id, status="invalid", status_reason="interrupted before its evaluation")
            what = f"interrupted experiment {current.number}" + (
                " (its unfinished changes were reset)" if moved else ""
            )
            row = tsv.ResultRow(run_git(["rev-parse", "--short=7", "HEAD"], wd), 0.0, "crash", what)
            self._finish(store, run_id, current.id, current.number, row, decision="invalid")
            store.log_event("fleet.recovered", {"iteration": current.number, "reset_to": best.commit}, run_id=run_id)
        if moved:
            self._reset(best.commit)
        return best

    def _finish(self, store: EvoDAG, run_id: int, iteration_id: int, n: int, row: tsv.ResultRow, **fields: Any) -> None:
        """Close iteration `n` and record its results.tsv row in the store in one transaction, then append the
        row: a kill in between leaves the row in the store, and the next start restores it (`_restore_rows`)."""
        with store.transaction():
            store.update_iteration(iteration_id, step="done", finished_at=store.clock(), **fields)
            self._log_row(store, run_id, n, row)
        tsv.append_result(self.paths.results, row)

    @staticmethod
    def _log_row(store: EvoDAG, run_id: int, n: int, row: tsv.ResultRow) -> None:
        store.log_event(tsv.RESULT_EVENT, {"iteration": n, "line": row.line()}, run_id=run_id)

    def _restore_rows(self, store: EvoDAG, run_id: int) -> None:
        """Append every results.tsv row the store recorded that the file lacks (a kill between the two)."""
        have = {row.line() for row in tsv.read_results(self.paths.results)}
        for event in store.events(run_id=run_id):
            if event.kind == tsv.RESULT_EVENT and event.payload["line"] not in have:
                commit, metric, status, description = event.payload["line"].split("\t", 3)
                tsv.append_result(self.paths.results, tsv.ResultRow(commit, float(metric), status, description))
                self.say(f"restored the results.tsv row of iteration {event.payload['iteration']}")

    def _reset(self, commit: str) -> None:
        """`git reset --hard commit` that never touches the results file (git-excluded; restored if an agent
        committed it anyway)."""
        results = self.paths.results
        rows = results.read_bytes() if results.is_file() else None
        run_git(["reset", "-q", "--hard", commit], self.paths.workdir)
        if rows is not None and (not results.is_file() or results.read_bytes() != rows):
            results.parent.mkdir(parents=True, exist_ok=True)
            results.write_bytes(rows)

    def _at(self, commit: str) -> bool:
        """True when the workdir is on `commit` with nothing changed."""
        wd = self.paths.workdir
        return run_git(["rev-parse", "HEAD"], wd) == commit and not run_git(["status", "--porcelain"], wd)

    def _session(self, store: EvoDAG, run_id: int, n: int, parent: Node, prompt: str, search: bool) -> SessionRun:
        """The agent's session (recorded with its cost); for codex and pi, a failed session that changed nothing
        is retried once with config.fallback_model (claude falls back by itself)."""
        cfg = self.spec.config
        session = run_session(self.paths, n, prompt, search)
        self._record_session(store, run_id, n, parent, session, cfg.model)
        if session.failed and retries_with_fallback(cfg) and self._at(parent.commit):
            why = session.failure.message[:120] if session.failure else f"exit {session.returncode}"
            self.say(f"iter {n}: the {cfg.model} session failed ({why}); retrying with "
                     f"fallback_model {cfg.fallback_model}")  # fmt: skip
            session = run_session(self.paths, n, prompt, search, model=cfg.fallback_model, append=True)
            self._record_session(store, run_id, n, parent, session, cfg.fallback_model)
        return session

    def _record_session(
        self, store: EvoDAG, run_id: int, n: int, parent: Node, session: SessionRun, model: str
    ) -> None:
        from saddler.agentcli import parse_usage

        usage = parse_usage(session.stdout)
        store.add_session(
            run_id,
            "diagnosis_patch",
            self.spec.config.provider,
            iteration=n,
            node_id=parent.id,
            model=model,
            turns=usage["turns"],
            tokens_in=usage["tokens_in"],
            tokens_out=usage["tokens_out"],
            cost_usd=usage["cost_usd"],
            duration_s=round(session.duration_s, 3),
            transcript_path=str(session.log_path),
            outcome=session.outcome,
            error=session.failure.message[:2000] if session.failure else "",
        )
        self.paths.write_state(cost_usd=store.session_cost(run_id))

    def _tampered(
        self,
        store: EvoDAG,
        run_id: int,
        iteration_id: int,
        n: int,
        parent: Node,
        node: Node,
        touched: list[str],
        desc: str,
    ) -> Node:
        """The agent changed the fixed eval harness: a crash row, the change reset, never evaluated or kept."""
        reason = f"protected path changed: {', '.join(touched)}"
        self._reset(parent.commit)
        store.update_node(node.id, status="invalid", status_reason=f"{reason} (the eval harness is immutable)")
        edge = store.edge_between(parent.id, node.id)
        store.add_lesson(
            run_id, "general", "uncertain", f"iteration {n}: {desc}: {reason}", node_id=node.id, edge_id=edge.id,
            iteration=n, task_id="metric",
        )  # fmt: skip
        row = tsv.ResultRow(node.commit[:7], 0.0, "crash", f"{reason} ({desc})")
        self._finish(store, run_id, iteration_id, n, row, candidate_id=node.id, decision="invalid")
        self.say(f"iter {n}: crash: {reason} (reset; the eval harness is immutable)")
        return parent

    def _loop(self, store: EvoDAG, run_id: int) -> str:
        current = self._baseline(store, run_id)
        stop = self.spec.stop_when
        while True:
            rows = tsv.recorded(store)  # the orchestrator's own rows: one the agent wrote never counts
            done = len(store.iterations(run_id=run_id))
            cost = store.session_cost(run_id) if stop.cost_cap_usd else 0.0
            spent = budget_spent(done, stop.max_iterations, cost_usd=cost, cost_cap_usd=stop.cost_cap_usd)
            if spent:
                return spent
            if self.paths.paused.exists():
                self.paths.write_state(status="paused")
                store.log_event("fleet.paused", {"iteration": done}, run_id=run_id)
                while self.paths.paused.exists():
                    self.sleep(self.poll_s)
                self.paths.write_state(status="running")
                store.log_event("fleet.resumed", {"iteration": done}, run_id=run_id)
            discards = tsv.trailing_discards(rows)
            search = self.spec.search.enabled and discards >= self.spec.search.plateau_threshold
            current = self._experiment(store, run_id, done + 1, current, rows, discards, search)

    def _experiment(
        self, store: EvoDAG, run_id: int, n: int, parent: Node, rows: list[tsv.ResultRow], discards: int, search: bool
    ) -> Node:
        wd, direction = self.paths.workdir, self.spec.problem.metric_direction
        it = store.start_iteration(
            run_id, n, 0, ["metric"], phase="none", parent_id=parent.id, exploration=search, stall_count=discards
        )
        self.paths.write_state(iteration=n, search=search)
        prompt = build_prompt(self.paths, n, discards, search, [r.line() for r in rows])
        session = self._session(store, run_id, n, parent, prompt, search)
        desc = description(session.stdout)
        if run_git(["status", "--porcelain"], wd):
            run_git(["add", "-A"], wd)
            run_git(["commit", "-q", "--no-verify", "-m", f"fleet it{n}: {desc or 'experiment'}"], wd)
        head = run_git(["rev-parse", "HEAD"], wd)
        if head == parent.commit:
            row = tsv.ResultRow(head[:7], 0.0, "discard", f"no change: {desc or 'the agent changed nothing'}")
            self._finish(store, run_id, it.id, n, row, decision="no_patch")
            self.say(f"iter {n}: no change")
            return parent
        desc = desc or run_git(["log", "-1", "--format=%s", head], wd)
        files = [f for f in run_git(["diff", "--name-only", parent.commit, head], wd).splitlines() if f]
        touched = protected_changes(files, self.paths.protected)
        if not touched:
            run_git(["update-ref", f"refs/saddler/c/{head}", head], wd)
        diff = run_git(["diff", "--no-color", "--binary", parent.commit, head], wd)
        added = removed = 0
        for line in run_git(["diff", "--numstat", parent.commit, head], wd).splitlines():
            a, r, _ = line.split("\t", 2)
            added, removed = added + (int(a) if a.isdigit() else 0), removed + (int(r) if r.isdigit() else 0)
        origin = "search" if search else "agent"
        hyp = {"diagnosis": desc, "plan": desc, "patch_kind": "mixed", "origin": origin, "files": files}
        with store.transaction():
            node = store.add_node(
                run_id, head, parent.id, n, "none", "mixed", origin, hypothesis=hyp, lines_changed=added + removed
            )
            store.add_edge(run_id, parent.id, node.id, "patch", diff, files, added, removed)
        if touched:
            return self._tampered(store, run_id, it.id, n, parent, node, touched, desc)
        result, seed = self._eval(n)
        best = parent.batch_after
        verdict = MetricKeep(direction).decide(result.metric, best, result.error)
        keep, status, reason = verdict.kept, verdict.tsv_status, verdict.reason
        if not keep:
            self._reset(parent.commit)
        node = store.update_node(
            node.id,
            status=verdict.status,
            status_reason=reason,
            batch_before=best,
            batch_after=result.metric,
        )
        self._rollout(store, run_id, node, n, result, seed, keep)
        edge = store.edge_between(parent.id, node.id)
        store.add_lesson(
            run_id,
            "fixed" if keep else ("regressed" if status == "discard" else "general"),
            "uncertain",
            f"iteration {n}: {desc}: {reason}",
            node_id=node.id,
            edge_id=edge.id,
            iteration=n,
            task_id="metric",
        )
        store.set_edge_transitions(edge.id, ["metric"] if keep else [], [] if keep else ["metric"], [], [])
        row = tsv.ResultRow(head[:7], result.metric or 0.0, status, desc)
        self._finish(store, run_id, it.id, n, row, candidate_id=node.id, decision=verdict.status)
        self.say(f"iter {n}{' [search]' if search else ''}: {status} {result.metric} ({desc})")
        if keep:
            store.update_run(run_id, best_node_id=node.id)
            self.paths.write_state(best_metric=result.metric)
            return node
        return parent

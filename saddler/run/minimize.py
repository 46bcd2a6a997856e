"""Measured minimization: the best harness cut down to the changes that carry their weight on dev.

The best node's diff against the baseline is split into its changes (`saddler.harness.hunks`: one per hunk, a
whole file for a new, deleted or binary one), each attributed to the lineage edge it came from. Then **greedy
leave-one-out**: each step removes one group of changes from the current harness — first every edge's changes
together (largest first), then, inside an edge that stayed, each of its changes alone — commits the result as a
real node (origin `minimize`, parent the harness it was cut from, one `revert` edge) and evaluates it on dev with
the run's dev seeds. Both harnesses are compared as acceptance compares them (`Acceptance.decide`: task by task
on the tasks valid in both, with P(better) from the paired sign test), against the harness it was cut from and
against the full best (so removals that each cost a little cannot add up). `minimize.rule` says when the removal
stands: `not_lower` (the default) when the smaller harness's dev score is not lower than either; `not_clearly_worse`
unless P(better) is at most 1 - `acceptance_confidence` against either (`policies.dev_guard`'s test), which also
removes a change that carries one or two tasks. What a change carries is the dev score with it minus without it.

Why leave-one-out rather than delta debugging: every test is a dev evaluation that costs rollouts. One pass costs
at most one evaluation per edge plus one per change of a multi-change edge, known before it starts and cut by a
budget (`minimize.max_rollouts`, and the run's own `loop.max_rollouts` / `cost_cap_usd`, which count these
rollouts); and each change's test is its contribution, which the report and the pull-request hand-off show.
Delta debugging saves evaluations only when most changes are dead weight, and measures no single change. A pair
that helps only together is kept: removing either one loses the gain.

Resumable: every step is a `minimize.step` event written after its evaluation; commits have logical dates, so a
resumed minimization re-makes the same commits, finds their nodes and cached rollouts, replays the recorded steps
and pays for nothing twice. The record is read by `saddler.minimized`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evodag.decisions import NEUTRAL, REJECTED
from evodag.models import Node
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.harness.gitcmd import git
from saddler.harness.hunks import Hunk, join_hunks, split_hunks
from saddler.harness.plumbing import apply_on_index, commit_tree
from saddler.minimized import FINISHED_EVENT, ORIGIN, STEP_EVENT, Contribution, Minimization, minimization
from saddler.reporting.progress import make_progress
from saddler.run.context import RunContext, open_context
from saddler.run.folder import RunPaths, run_lock
from saddler.run.minimize_rule import TrainCheck, Verdict, judge, judge_train

Say = Callable[[str], None]


@dataclass(frozen=True)
class Step:
    """One removal: step `number` takes `changes` (1-based numbers) out of the current harness."""

    number: int
    changes: tuple[int, ...]


def minimize(ctx: RunContext, say: Say, node: Node | None = None) -> Minimization | None:
    """Minimize `node` (default: the run's best) on dev, record it, apply the ranking policy again (the minimized
    harness is a kept node like any other), return it; a finished minimization of the same node, or of the one it
    made, is returned as recorded. None when there is nothing to minimize (the baseline, or `dev_eval = never`)."""
    store = ctx.store
    best = node or ctx.best()
    done = minimization(store, ctx.run_id, best.id)
    if done is not None:
        return done
    baseline_id = store.get_run(ctx.run_id).baseline_node_id
    if baseline_id is None or best.id == baseline_id or ctx.cfg.policies.dev_eval == "never":
        return None
    baseline = store.get_node(baseline_id)
    hunks = split_hunks(ctx.space.diff(baseline.commit, best.commit))
    if not hunks:
        return None
    edges = source_edges(store, baseline, best, hunks)
    run = _Minimizer(ctx, say, baseline, ctx.eval_dev(best), hunks, edges)
    stopped = run.pass_over(edge_steps(hunks, edges, start=1))
    if stopped == "done":  # inside each edge that stayed, each of its changes alone
        stopped = run.pass_over(change_steps(hunks, edges, run.kept, start=run.steps + 1))
    result = run.result(edges, stopped)
    store.log_event(FINISHED_EVENT, result.to_json(), run_id=ctx.run_id)
    ctx.update_best()  # the ranking policy over every kept node, the minimized harness included
    return result


def source_edges(store: EvoDAG, baseline: Node, best: Node, hunks: list[Hunk]) -> list[int | None]:
    """Per change, the lineage edge between `baseline` and `best` that made it: the last one whose diff adds the
    change's added lines (removes its removed lines, for a pure removal) in the same file; else the last edge that
    changed its file (a change two edges wrote together); None when no edge names the file."""
    chain = [n for n in store.lineage(best.id) if n.id != baseline.id]
    edges = [e for e in (store.edge_into(n.id) for n in chain) if e is not None]
    made = {e.id: _changed_lines(split_hunks(store.get_blob(e.diff_sha))) for e in edges}
    found: list[int | None] = []
    for hunk in hunks:
        mine = _changed_lines([hunk]).get(hunk.file, (set(), set()))
        touching = [e.id for e in edges if hunk.file in e.files_changed]
        writers = [e for e in touching if _wrote(mine, made[e].get(hunk.file, (set(), set())))]
        found.append(max(writers) if writers else max(touching) if touching else None)
    return found


def _wrote(mine: tuple[set[str], set[str]], theirs: tuple[set[str], set[str]]) -> bool:
    """Whether an edge whose diff changed `theirs` (added, removed lines of a file) made the change `mine`: it adds
    all of its added lines, or (a pure removal) removes all of its removed lines."""
    added, removed = mine
    return added <= theirs[0] if added else bool(removed) and removed <= theirs[1]


def _changed_lines(hunks: list[Hunk]) -> dict[str, tuple[set[str], set[str]]]:
    """Per file, the (added, removed) line texts of `hunks` (blank lines left out: every edit has some)."""
    out: dict[str, tuple[set[str], set[str]]] = {}
    for hunk in hunks:
        added, removed = out.setdefault(hunk.file, (set(), set()))
        for line in (hunk.header + hunk.body).splitlines():
            if line.startswith(("+++", "---")) or not line[1:].strip():
                continue
            if line.startswith("+"):
                added.add(line[1:])
            elif line.startswith("-"):
                removed.add(line[1:])
    return out


def edge_steps(hunks: list[Hunk], edges: list[int | None], start: int) -> list[Step]:
    """One step per source edge with all its changes, the most changed lines first (then the older edge)."""
    groups: dict[int | None, list[int]] = {}
    for number, edge in enumerate(edges, 1):
        groups.setdefault(edge, []).append(number)
    order = sorted(groups.items(), key=lambda g: (-sum(hunks[i - 1].lines for i in g[1]), g[0] or 0))
    return [Step(start + i, tuple(changes)) for i, (_edge, changes) in enumerate(order)]


def change_steps(hunks: list[Hunk], edges: list[int | None], kept: set[int], start: int) -> list[Step]:
    """One step per kept change whose edge kept more than one change, the most changed lines first."""
    per_edge: dict[int | None, int] = {}
    for number in kept:
        per_edge[edges[number - 1]] = per_edge.get(edges[number - 1], 0) + 1
    singles = [n for n in sorted(kept) if per_edge[edges[n - 1]] > 1]
    singles.sort(key=lambda n: (-hunks[n - 1].lines, n))
    return [Step(start + i, (n,)) for i, n in enumerate(singles)]


class _Minimizer:
    """The state of one minimization: the changes kept, the current harness, what each step measured."""

    def __init__(
        self, ctx: RunContext, say: Say, baseline: Node, best: Node, hunks: list[Hunk], edges: list[int | None]
    ) -> None:
        self.ctx, self.say, self.baseline, self.best, self.hunks, self.edges = ctx, say, baseline, best, hunks, edges
        self.kept = set(range(1, len(hunks) + 1))
        self.current = best
        self.steps = 0
        self.measured: dict[int, tuple[float | None, int | None, int]] = {}  # change -> (points, dev tasks, step)
        self.recorded = {
            e.payload["step"]: e.payload
            for e in ctx.store.events(run_id=ctx.run_id, kind=STEP_EVENT)
            if e.payload["best_node"] == best.id
        }
        when = git(["show", "-s", "--format=%ct", best.commit], ctx.space.repo_dir).stdout.strip()
        self.epoch = int(when or 0)

    def pass_over(self, steps: list[Step]) -> str:
        """Run `steps` in order; "done", or why the budget stopped it (the rest stay kept, unmeasured)."""
        for step in steps:
            self.steps = step.number
            if step.number not in self.recorded:
                short = self._short_of_budget(step)
                if short:
                    return short
            self._step(step)
        return "done"

    def _step(self, step: Step) -> None:
        ctx, store = self.ctx, self.ctx.store
        trial = sorted(self.kept - set(step.changes))
        cand = self._candidate(step, trial)
        if cand is None:  # the rest does not apply without these changes: they stay
            self._record(step, None, None, False, "the other changes do not apply without it", None)
            return
        verdict = judge(ctx, cand, self.current, self.best, self.baseline)
        cand = store.get_node(cand.id)  # with its dev score, when the evaluation ran to the end
        worse = verdict.worse
        why = f"without change(s) {', '.join(map(str, step.changes))}: {verdict.reason}"
        train: TrainCheck | None = None
        if not worse and step.number not in self.recorded:  # dev allows the cut: do the tasks its edge fixed?
            edge_id = self.edges[step.changes[0] - 1]
            edge = store.get_edge(edge_id) if edge_id is not None else None
            train = judge_train(ctx, cand, self.current, self.best, edge, verdict.confidence)
            if train is not None:
                worse = train.worse
                why += f"; {train.reason}"
        if step.number in self.recorded:  # decided before a stop: the record stands, whatever the rule is now
            worse = not self.recorded[step.number]["removed"]
        if step.number not in self.recorded:
            store.update_node(cand.id, status=REJECTED if worse else NEUTRAL, status_reason=f"minimize: {why}")
        self._record(step, cand, verdict, not worse, why, train)
        if not worse:
            self.kept, self.current = set(trial), cand

    def _record(
        self, step: Step, cand: Node | None, verdict: Verdict | None, removed: bool, why: str, train: TrainCheck | None
    ) -> None:
        for change in step.changes:
            self.measured[change] = (
                (verdict.points, verdict.tasks, step.number) if verdict else (None, None, step.number)
            )
        if step.number in self.recorded:
            return
        payload = {
            "best_node": self.best.id,
            "step": step.number,
            "changes": list(step.changes),
            "node": cand.id if cand else None,
            "reference": self.current.id,
            "dev_points": verdict.points if verdict else None,
            "dev_tasks": verdict.tasks if verdict else None,
            "confidence": verdict.confidence if verdict else None,
            "train_tasks": train.tasks if train else None,
            "train_lost": train.lost if train else None,
            "reference_rollouts": train.reference_rollouts if train else 0,
            "removed": removed,
            "reason": why,
        }
        self.ctx.store.log_event(STEP_EVENT, payload, run_id=self.ctx.run_id)
        self.say(f"minimize step {step.number}: {why}")

    def _candidate(self, step: Step, trial: list[int]) -> Node | None:
        """The commit of the baseline plus the changes `trial`, on the current harness, as a node (made once)."""
        ctx, store, space = self.ctx, self.ctx.store, self.ctx.space
        if trial:
            tree, _why = apply_on_index(
                space.repo_dir, space.git_dir, self.baseline.commit, join_hunks([self.hunks[i - 1] for i in trial])
            )
            if tree is None:
                return None
        else:
            tree = space.tree_of(self.baseline.commit)
        removed = ", ".join(map(str, step.changes))
        message = f"saddler: minimize n{self.best.id}: without change(s) {removed}"
        sha = commit_tree(space.repo_dir, tree, self.current.commit, message, lambda: self.epoch + 60 * step.number)
        space.keep(sha)
        node = store.node_by_commit(sha, run_id=ctx.run_id)
        if node is not None:
            return node
        added, deleted = space.numstat(self.baseline.commit, sha)
        with store.transaction():
            node = store.add_node(
                ctx.run_id,
                sha,
                self.current.id,
                self.best.iteration,
                "none",
                "revert",
                ORIGIN,
                hypothesis={
                    "minimize": {
                        "best_node": self.best.id,
                        "step": step.number,
                        "removed": list(step.changes),
                        "kept": trial,
                    }
                },
                lines_changed=added + deleted,
            )
            a, r = space.numstat(self.current.commit, sha)
            store.add_edge(
                ctx.run_id,
                self.current.id,
                node.id,
                "revert",
                space.diff(self.current.commit, sha),
                space.changed_files(self.current.commit, sha),
                a,
                r,
            )
        return node

    def _mine(self) -> list[Node]:
        """The nodes this minimization made."""
        return [
            n
            for n in self.ctx.store.nodes(self.ctx.run_id)
            if n.origin == ORIGIN and (n.hypothesis or {}).get("minimize", {}).get("best_node") == self.best.id
        ]

    def spent(self) -> int:
        """Dev and train rollouts stored for this minimization's nodes and for its references' train runs (cached
        copies included, as the run's budget counts)."""
        store, run_id = self.ctx.store, self.ctx.run_id
        mine = {n.id for n in self._mine()}
        on_refs = sum(
            e.payload.get("reference_rollouts", 0)
            for e in store.events(run_id=run_id, kind=STEP_EVENT)
            if e.payload["best_node"] == self.best.id
        )
        return on_refs + sum(1 for r in store.rollouts(run_id) if r.node_id in mine and r.split != "test")

    def _short_of_budget(self, step: Step) -> str:
        """Why `step` may not run ("" when it may): one dev evaluation and its train check must fit every budget."""
        ctx = self.ctx
        edge_id, mode = self.edges[step.changes[0] - 1], ctx.cfg.minimize.train_check
        train = len(ctx.tasks["train"]) if mode == "all" else 0
        if mode == "fixed" and edge_id is not None:
            train = len(ctx.store.get_edge(edge_id).fixed)
        cost = len(ctx.tasks["dev"]) * len(ctx.dev_seeds) + train * len(ctx.train_seeds)
        cap, loop = ctx.cfg.minimize.max_rollouts, ctx.cfg.loop
        if cap and self.spent() + cost > cap:
            return f"minimize.max_rollouts ({cap}) would be passed"
        if loop.max_rollouts and ctx.store.count_rollouts(ctx.run_id) + cost > loop.max_rollouts:
            return f"loop.max_rollouts ({loop.max_rollouts}) would be passed"
        spent_usd = ctx.store.rollout_cost(ctx.run_id) + ctx.store.session_cost(ctx.run_id)
        if loop.cost_cap_usd and spent_usd >= loop.cost_cap_usd:
            return f"loop.cost_cap_usd ({loop.cost_cap_usd}) is spent"
        return ""

    def result(self, edges: list[int | None], stopped: str) -> Minimization:
        contributions = tuple(
            Contribution(
                number,
                h.file,
                h.label,
                h.patch,
                h.lines,
                edges[number - 1],
                number in self.kept,
                *self.measured.get(number, (None, None, None)),
            )
            for number, h in enumerate(self.hunks, 1)
        )
        lines = (sum(h.lines for h in self.hunks), sum(self.hunks[i - 1].lines for i in self.kept))
        return Minimization(
            self.best.id,
            self.current.id,
            len(self.hunks),
            len(self.kept),
            lines,
            (self.best.dev_mean, self.current.dev_mean),
            self.spent(),
            stopped,
            contributions,
            self.ctx.cfg.minimize.rule,
            len(self.ctx.tasks["dev"]),
        )


def minimize_run(run_dir: Path, node_id: int | None = None, say: Say | None = None) -> Minimization | None:
    """`saddler minimize RUN [--node ID]`: minimize a node of a stopped run (default: its best) under its run lock.
    On a finished run, the run's best and its counterpart are then on test, `best/` and the report written again
    (`finish.refresh_answer`)."""
    from saddler.run.finish import refresh_answer

    paths = RunPaths(Path(run_dir).resolve())
    cfg = load_run_config(paths.root)
    tell = say or (lambda _text: None)
    with run_lock(paths.root), EvoDAG(paths.db) as store:
        ctx = open_context(paths, cfg, store, make_progress(say is None), say=tell)
        try:
            node = store.get_node(node_id) if node_id is not None else None
            result = minimize(ctx, tell, node)
            if result is not None and store.get_run(ctx.run_id).status == "finished":
                refresh_answer(ctx, tell)
            return result
        finally:
            ctx.executor.close()
            ctx.space.prune()
            ctx.space.close()

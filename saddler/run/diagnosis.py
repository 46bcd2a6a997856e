"""Steps 4-5 of an iteration: diagnosis-patch in an isolated worktree of the parent, then validation.

Each attempt is one session paid for once (keyed `(iteration, diagnosis_patch, attempt)`, see
`saddler.run.session_calls`). A failed session (unreadable answer, turn or budget limit, timeout, non-zero exit)
is retried up to `sessions.retries` times with its failure stated in `retry_reason`. A patch that fails
validation is an `invalid` node, and the next attempt (up to `policies.max_patch_attempts` patches) is told which
check failed: empty change, which protected path, the phase and what it allows, which structure rule. What was
refused is that change (its tree), not its idea: a version of the same fix that passes the checks is evaluated.
Ideas evaluated on this parent in earlier iterations are excluded (`Excluded`), except one whose single change
here moved no task of its batch: that is evidence against the change, not the idea, so the idea stays open until
a second change of it is evaluated there, shown with the diff that did nothing (an identical change is refused
unevaluated, which is no evidence either way). With `policies.exclude_worse_on_lineage`, an idea whose change made
an ancestor of the parent clearly worse (rejected at P(better) <= 1 - the acceptance's confidence) is excluded on
its descendants too: the lineage carries the lesson, so an author who writes it again spends no iteration on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evodag.models import Iteration, Node, RolloutRow
from saddler.policies.acceptance import clearly_worse
from saddler.run import audit, evolution_request, phase_moves
from saddler.run.context import RunContext
from saddler.run.faults import fault_point
from saddler.run.outcomes import evidence
from saddler.run.session_calls import failure_reason, worth_asking_again
from saddler.sessions.schema import DiagnosisRequest, DiagnosisResult, Hypothesis

Say = Callable[[str], None]
NO_EFFECT_DIFF_CHARS = 4000
"""How much of a no-effect change's diff a diagnosis sees (it is there to show what the change did not do)."""


@dataclass
class Excluded:
    """What not to propose again on this parent. `plans`: ideas already evaluated here (origins in first-seen
    order, each with the plan its agent wrote, shown in the prompt as written). `refused`: changes that failed
    validation, by origin with the reason, and their trees: the change is excluded, not the idea — a version
    of the same fix that passes the checks is welcome. `no_effect`: ideas whose one evaluated change here moved
    no task of its batch, by origin with that change's diff (cut at `NO_EFFECT_DIFF_CHARS`): open until a second
    change of the idea is evaluated here, and `no_effect_trees` refuses the same change again (unevaluated)."""

    plans: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    refused_trees: dict[str, str] = field(default_factory=dict)  # tree sha -> origin
    no_effect: dict[str, str] = field(default_factory=dict)
    no_effect_trees: dict[str, str] = field(default_factory=dict)  # tree sha -> "origin (nN)"
    worse_on_lineage: dict[str, str] = field(default_factory=dict)  # origin -> where it made an ancestor worse
    elsewhere: dict[str, str] = field(default_factory=dict)  # origin -> the iteration trying it now, or the line

    def add(self, origin: str, plan: str = "") -> None:
        if origin not in self.plans or (plan and not self.plans[origin]):
            self.plans[origin] = plan

    def refuse(self, origin: str, why: str, tree: str | None) -> None:
        self.refused[origin] = why
        if tree:
            self.refused_trees[tree] = origin

    @property
    def origins(self) -> list[str]:
        """Every idea not to write here: those evaluated on this parent, those worse on its lineage, those taken
        elsewhere."""
        return list(dict.fromkeys([*self.plans, *self.worse_on_lineage, *self.elsewhere]))

    def excluded_why(self, origin: str) -> str:
        """Why `origin` may not be written here ("" when it may)."""
        if origin in self.plans:
            return f"{origin} was already tried"
        if origin in self.worse_on_lineage:
            return f"{origin} {self.worse_on_lineage[origin]}"
        return f"{origin} {self.elsewhere[origin]}" if origin in self.elsewhere else ""

    @classmethod
    def of_parent(cls, ctx: RunContext, parent: Node, iteration: int, upto: int) -> Excluded:
        """What other iterations tried on `parent` (iterations in flight too), among the nodes up to id `upto` (the
        DAG when `iteration`'s diagnosis first started: a resumed iteration sees what it saw then, never its own)."""
        found = cls()
        children = [n for n in ctx.store.children(parent.id) if n.iteration != iteration and n.id <= upto]
        evaluated: dict[str, list[Node]] = {}
        for node in sorted(children, key=lambda n: n.origin):
            if node.status == "invalid":  # refused unevaluated: no evidence against the idea
                found.refuse(node.origin, node.status_reason, ctx.space.tree_of(node.commit))
            else:
                evaluated.setdefault(node.origin, []).append(node)
        for origin, nodes in evaluated.items():
            once = len(nodes) == 1 and nodes[0].status == "rejected"
            edge = ctx.store.edge_into(nodes[0].id) if once else None
            if edge is not None and not edge.fixed and not edge.regressed:
                found.no_effect[origin] = ctx.space.diff(parent.commit, nodes[0].commit)[:NO_EFFECT_DIFF_CHARS]
                found.no_effect_trees[ctx.space.tree_of(nodes[0].commit)] = f"{origin} (n{nodes[0].id})"
                continue
            for node in nodes:
                found.add(origin, str((node.hypothesis or {}).get("plan", "")))
        if ctx.cfg.policies.exclude_worse_on_lineage:
            found.worse_on_lineage = worse_on_lineage(ctx, parent, iteration, upto)
        found.elsewhere = {
            o: why for o, why in taken_elsewhere(ctx, parent, iteration, upto).items() if o not in found.plans
        }
        return found


def taken_elsewhere(ctx: RunContext, parent: Node, iteration: int, upto: int) -> dict[str, str]:
    """With several iterations in flight: ideas another iteration is evaluating now (a candidate of another iteration
    still pending), and ideas the latest kept node holds that the parent does not (the line moved on while this
    iteration ran: writing them again here adds nothing the line lacks). Nothing with one iteration in flight."""
    if ctx.pipeline.iterations <= 1:
        return {}
    found: dict[str, str] = {}
    for node in ctx.store.nodes(ctx.run_id, status="pending"):
        if node.iteration != iteration and node.id <= upto and node.origin not in found:
            found[node.origin] = f"is being tried by iteration {node.iteration} (n{node.id})"
    held = {n.origin for n in ctx.store.lineage(parent.id)}
    latest = ctx.store.get_run(ctx.run_id).best_node_id
    line = [n for n in ctx.store.lineage(latest)] if latest is not None else []
    for node in line:
        if node.id <= upto and node.origin not in held and node.origin not in found and node.parent_id is not None:
            found[node.origin] = f"is already in the best node n{latest}"
    return found


def worse_on_lineage(ctx: RunContext, parent: Node, iteration: int, upto: int) -> dict[str, str]:
    """Ideas whose change on a strict ancestor of `parent` (in another iteration, among the nodes up to id `upto`)
    was rejected as clearly worse than that ancestor: P(better) of its decision at or below 1 - the acceptance's
    confidence. Only the decision's aggregates are read (the iteration's stored evidence), never a task of dev or
    test."""
    decided = {
        i.candidate_id: i.evidence or {}
        for i in ctx.store.iterations(ctx.run_id)
        if i.number != iteration and i.candidate_id is not None and i.candidate_id <= upto
    }
    found: dict[str, str] = {}
    for ancestor in ctx.store.lineage(parent.id)[:-1]:
        for node in ctx.store.children(ancestor.id):
            confidence = decided.get(node.id, {}).get("confidence")
            if node.status != "rejected" or confidence is None or node.origin in found:
                continue
            if clearly_worse(float(confidence), ctx.acceptance.confidence):
                found[node.origin] = (
                    f"made n{node.id} clearly worse than its parent n{ancestor.id}, an ancestor of this parent "
                    f"(P(better) {float(confidence):.2f})"
                )
    return found


@dataclass
class _Attempt:
    result: DiagnosisResult
    commit: str | None = None
    problems: list[str] = field(default_factory=list)
    suspect: str = ""  # the cheat audit's mark of the change (`saddler.run.audit`)


def patch(ctx: RunContext, it: Iteration, parent: Node, before: list[RolloutRow], say: Say) -> Node | None:
    """Diagnose and patch; the valid candidate, else the last invalid one, else None (no patch).

    An iteration an evidence move narrowed whose diagnosis finds no patch there is asked again in the phase
    `PhaseSchedule.widen` gives (when the setting allows), as a `phase.moved` event with `"widened": true`; a
    resumed iteration replays its attempts in the phase each was asked in."""
    store = ctx.store
    upto = _log_evidence(ctx, it, before)
    excluded = Excluded.of_parent(ctx, parent, it.number, upto)
    it, narrowed, widened = phase_moves.attempt_phase(ctx, it)
    node: Node | None = None
    attempt = patches = failures = 0
    reason = ""
    while patches < ctx.cfg.policies.max_patch_attempts:
        wider = ctx.phases.widen(it.phase) if narrowed else None  # where a no_patch of this attempt is asked again
        made = _attempt(ctx, it, parent, before, attempt, excluded, reason, wider is not None)
        attempt += 1
        result = made.result
        failed = failure_reason(result.stats) if result.status == "failed" else ""
        if result.status == "failed" and failures < ctx.cfg.sessions.retries and worth_asking_again(result.stats):
            failures += 1
            reason = failed or f"the session failed: {result.reason}"
            store.log_event("diagnosis.retry", {"iteration": it.number, "reason": reason}, run_id=ctx.run_id)
            say(f"iter {it.number:>3} [{it.phase}] diagnosis failed, retrying: {reason[:160]}")
            continue
        if result.status != "patched" or result.hypothesis is None:
            why = failed or result.reason
            if wider is not None and result.status == "no_patch":
                phase, because = wider
                say(f"iter {it.number:>3} [{it.phase}] no patch: {why}; asked again in {phase}: {because}")
                it, narrowed = phase_moves.widen(ctx, it, phase, because, why, attempt, recorded=widened), False
                reason = (
                    f"the diagnosis found no patch in the phase it was asked in ({why[:300]}); {because}: "
                    f"this attempt may write {' or '.join(ctx.phases.allowed_kinds(phase))} patches"
                )
                continue
            store.log_event("diagnosis.no_patch", {"iteration": it.number, "reason": why}, run_id=ctx.run_id)
            say(f"iter {it.number:>3} [{it.phase}] no patch: {why}")
            return node
        patches += 1
        hyp = result.hypothesis
        tried = excluded.excluded_why(hyp.origin)
        if made.commit is None:
            store.log_event("diagnosis.empty", {"iteration": it.number, "origin": hyp.origin}, run_id=ctx.run_id)
            excluded.refuse(hyp.origin, "empty change", None)
            reason = (
                "your change was refused: empty change — the worktree had no edit when the session ended; edit the "
                "harness files in the worktree itself (a commit of your own is fine, an edit elsewhere is not)"
            )
            continue
        tree = ctx.space.tree_of(made.commit)
        problems = list(made.problems)
        if tried:
            problems.append(f"excluded mutation: {tried}")
        if tree in excluded.refused_trees:
            again = excluded.refused_trees[tree]
            problems.append(f"the same change as the refused {again} ({excluded.refused.get(again, 'refused')})")
        if tree in excluded.no_effect_trees:
            problems.append(f"the same change as {excluded.no_effect_trees[tree]}, which moved no task here")
        node = _candidate_node(ctx, it, parent, made.commit, hyp, problems)
        if made.suspect:
            audit.record(ctx, it, node, "diff", made.suspect)
        if not problems:
            return node
        excluded.refuse(hyp.origin, "; ".join(problems), tree)
        say(f"iter {it.number:>3} invalid n{node.id} {hyp.origin}: {'; '.join(problems)}")
        reason = (
            f"your change ({hyp.origin}) was refused: {'; '.join(problems)}. The worktree is clean again; make a "
            "change that passes these checks (the same fix without what was refused is welcome)"
        )
    return node


def _attempt(
    ctx: RunContext,
    it: Iteration,
    parent: Node,
    before: list[RolloutRow],
    attempt: int,
    excluded: Excluded,
    reason: str,
    widens: bool,
) -> _Attempt:
    """One session in a fresh worktree of the parent, its edit committed and checked; the worktree is removed."""
    space = ctx.space
    worktree = space.worktree(parent.commit, f"it{it.number}-a{attempt}")
    try:
        request = diagnosis_request(ctx, it, parent, worktree, before, attempt, excluded, reason, widens)
        result, staged = ctx.calls.diagnose(request, parent.id)
        if result.status != "patched" or result.hypothesis is None:
            return _Attempt(result)
        hyp = result.hypothesis
        message = f"saddler it{it.number}: {hyp.origin}: {hyp.plan[:60]}"
        commit = space.commit_worktree(worktree, message, tree=staged)
        fault_point("commit")
        if commit is None:
            return _Attempt(result)
        suspect = audit.diff_suspect(ctx, parent.commit, commit)
        problems = validate(ctx, it, parent.commit, commit, worktree) + ([suspect] if audit.refuses(ctx) else [])
        return _Attempt(result, commit, [p for p in problems if p], suspect)
    finally:
        space.remove_worktree(worktree)


def diagnosis_request(
    ctx: RunContext,
    it: Iteration,
    parent: Node,
    worktree: Path,
    rows: list[RolloutRow],
    attempt: int,
    excluded: Excluded,
    retry_reason: str = "",
    widens: bool = False,
) -> DiagnosisRequest:
    """What one diagnosis attempt is asked: the batch's evidence on `parent`, the phase, and what not to write
    again (`excluded`)."""
    comp = ctx.space.config.components
    return DiagnosisRequest(
        **ctx.session_paths(),
        worktree=str(worktree),
        iteration=it.number,
        parent_node_id=parent.id,
        phase=it.phase,
        allowed_kinds=ctx.phases.allowed_kinds(it.phase),
        component_globs={"capability": comp.capability, "steering": comp.steering, "protected": comp.protected},
        evidence=evidence(rows, ctx.task_index),
        exploration=it.exploration,
        lineage_origins=evolution_request.lineage_origins(ctx.store, parent.id),
        excluded=excluded.origins,
        excluded_plans={o: p for o, p in excluded.plans.items() if p},
        refused=dict(excluded.refused),
        no_effect=dict(excluded.no_effect),
        worse_on_lineage=dict(excluded.worse_on_lineage),
        elsewhere=dict(excluded.elsewhere),
        attempt=attempt,
        retry_reason=retry_reason,
        check_command=ctx.cfg.sessions.check_command or ctx.space.config.check_command,
        trace_format=ctx.benchmark.trace_format,
        widens_on_no_patch=widens,
    )


def validate(ctx: RunContext, it: Iteration, parent: str, commit: str, worktree: Path) -> list[str]:
    """Every check the change parent→commit fails, each naming what failed and what would pass."""
    space = ctx.space
    files = space.changed_files(parent, commit)
    problems = space.check_change(parent, commit)
    allowed = ctx.phases.allowed_kinds(it.phase)
    by_kind: dict[str, list[str]] = {}
    for path in files:
        by_kind.setdefault(space.classify(path), []).append(path)
    wrong = {k: v for k, v in by_kind.items() if k not in allowed and k != "protected"}
    if wrong:
        comp = space.config.components
        globs = {"capability": comp.capability, "steering": comp.steering}
        what = "; ".join(f"{kind}: {', '.join(paths)}" for kind, paths in sorted(wrong.items()))
        may = ", ".join(f"{k} ({', '.join(globs.get(k, [])) or 'no paths'})" for k in allowed)
        problems.append(f"wrong phase: the {it.phase} phase allows {may} only; this change also touches {what}")
    return problems + [f"structure rule: {p}" for p in space.validate_commit(worktree, parent, commit)]


def _candidate_node(
    ctx: RunContext, it: Iteration, parent: Node, commit: str, hyp: Hypothesis, problems: list[str]
) -> Node:
    store, space = ctx.store, ctx.space
    existing = store.node_by_commit(commit, run_id=ctx.run_id)
    if existing is not None and existing.parent_id == parent.id:
        return existing
    files = space.changed_files(parent.commit, commit)
    added, removed = space.numstat(space.baseline_commit(), commit)
    with store.transaction():
        node = store.add_node(
            ctx.run_id,
            commit,
            parent.id,
            it.number,
            it.phase,
            space.patch_kind(files),
            hyp.origin,
            status="invalid" if problems else "pending",
            status_reason="; ".join(problems),
            hypothesis=hyp.model_dump(),
            lines_changed=added + removed,
        )
        fault_point("write")
        a, r = space.numstat(parent.commit, commit)
        store.add_edge(ctx.run_id, parent.id, node.id, "patch", space.diff(parent.commit, commit), files, a, r)
    return node


def _log_evidence(ctx: RunContext, it: Iteration, before: list[RolloutRow]) -> int:
    """The traces diagnosis is shown, logged once per iteration (also when a resumed iteration diagnoses again), with
    the DAG's newest node then; returns that node id (a resumed iteration reads it back: it excludes what it saw)."""
    logged = [e for e in _evidence_events(ctx) if e.payload.get("iteration") == it.number]
    if logged:
        return int(logged[0].payload.get("last_node", ctx.store.last_node_id(ctx.run_id)))
    upto = ctx.store.last_node_id(ctx.run_id)
    ctx.store.log_event(
        "diagnosis.evidence",
        {"iteration": it.number, "trace_paths": [r.trace_path for r in before if r.trace_path], "last_node": upto},
        run_id=ctx.run_id,
    )
    return upto


def _evidence_events(ctx: RunContext) -> list[Any]:
    """The diagnosis.evidence events of the iterations that may still be running (newest first): with one iteration
    at a time, the newest is the running one's (one row read); with several, those since the oldest in flight."""
    last = ctx.store.last_event(ctx.run_id, "diagnosis.evidence")
    if last is None or ctx.pipeline.iterations == 1:
        return [last] if last is not None else []
    return list(reversed(ctx.store.events(run_id=ctx.run_id, kind="diagnosis.evidence")))

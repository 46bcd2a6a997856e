"""GEPA's side of saddler's GEPA strategy (`bench/gepa_strategy.py`): the adapter, the proposer, the data loaders.

`SaddlerAdapter` is a `gepa.GEPAAdapter` over one open saddler run (`RunContext`): a candidate is a commit, named by
the texts of its editable files (`candidate_of`); `evaluate` runs the rollouts through the run's `Evaluator` and
reports the rollouts the store gained as GEPA's metric calls; `make_reflective_dataset` passes train evidence only;
`propose` (GEPA's `custom_candidate_proposer`) is one diagnosis-patch of the run's session backend. `Schedule` and
`IdleStop` watch GEPA's loop through its callback and stopper protocols.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evodag.decisions import NO_TRAINING_FAILURES
from evodag.models import Iteration, Node, RolloutRow
from saddler.harness.gitcmd import git, logical_commit_time
from saddler.run.context import RunContext
from saddler.run.diagnosis import Excluded, diagnosis_request, validate
from saddler.run.outcomes import by_task, evidence, failure_kinds
from saddler.scoring import task_value

COMPONENTS = ("capability", "steering")


@dataclass(frozen=True, order=True)
class Item:
    """One GEPA example: a task of one split (the split in the id keeps train and val apart in GEPA's cache)."""

    split: str
    task_id: str


class SplitLoader:
    """GEPA's `DataLoader` over the tasks of one split; the ids are the `Item`s themselves."""

    def __init__(self, split: str, task_ids: Sequence[str]) -> None:
        self.items = [Item(split, t) for t in task_ids]

    def all_ids(self) -> list[Item]:
        return list(self.items)

    def fetch(self, ids: Sequence[Item]) -> list[Item]:
        return list(ids)

    def __len__(self) -> int:
        return len(self.items)


def candidate_key(candidate: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(candidate), sort_keys=True).encode()).hexdigest()


def candidate_of(ctx: RunContext, commit: str) -> dict[str, str]:
    """The GEPA candidate of `commit`: per component kind, the JSON of {path: text} of its files."""
    listed = git(["ls-tree", "-r", "-z", "--name-only", commit], ctx.space.repo_dir).stdout
    files: dict[str, dict[str, str]] = {kind: {} for kind in COMPONENTS}
    for path in sorted(p for p in listed.split("\0") if p):
        kind = ctx.space.classify(path)
        if kind in files:
            files[kind][path] = ctx.space.read_file(commit, path) or ""
    return {kind: json.dumps(texts, sort_keys=True, indent=0) for kind, texts in files.items()}


class Schedule:
    """GEPA callback: what saddler's phase schedule reads before an iteration, from GEPA's loop: the train tasks
    shown (every sampled minibatch, skipped ones included, as saddler counts batches its parent passes) and each
    iteration's decision in saddler's words (accepted / rejected by GEPA, no_training_failures when GEPA skips a
    perfect minibatch; the proposer records no_patch and invalid)."""

    def __init__(self) -> None:
        self.iteration, self.shown, self.seen = 0, 0, set[Item]()
        self.before = (0, 0)
        self.decisions: dict[int, str | None] = {}

    @property
    def saturated(self) -> int:
        return sum(d == NO_TRAINING_FAILURES for d in self.decisions.values())

    def decided_before(self, number: int) -> list[str | None]:
        return [d for n, d in sorted(self.decisions.items()) if n < number]

    def on_minibatch_sampled(self, event: Mapping[str, Any]) -> None:
        self.iteration, self.before = int(event["iteration"]), (self.shown, len(self.seen))
        self.decisions[self.iteration] = None
        self.shown += len(event["minibatch_ids"])
        self.seen.update(event["minibatch_ids"])

    def on_evaluation_skipped(self, event: Mapping[str, Any]) -> None:
        if event["reason"] == "all_scores_perfect":
            self.decisions[int(event["iteration"])] = NO_TRAINING_FAILURES

    def on_candidate_accepted(self, event: Mapping[str, Any]) -> None:
        self.decisions[int(event["iteration"])] = "accepted"

    def on_candidate_rejected(self, event: Mapping[str, Any]) -> None:
        self.decisions[int(event["iteration"])] = "rejected"


class IdleStop:
    """GEPA stopper: stop after `limit` iterations in a row that spent no rollout. Such an iteration re-reads rollouts
    the run holds (the parent on a minibatch it ran before) and proposes nothing new (no allowed patch, or files
    already evaluated), so it is free under a budget of rollouts and, once the proposer has nothing left for any
    parent and minibatch, GEPA would loop for ever. `fired` says whether it ended the run."""

    def __init__(self, limit: int) -> None:
        self.limit, self.last, self.idle, self.fired = limit, -1, 0, False

    def __call__(self, gepa_state: Any) -> bool:
        spent = int(gepa_state.total_num_evals)
        self.idle, self.last = (self.idle + 1 if spent == self.last else 0), spent
        self.fired = self.idle >= self.limit
        return self.fired


class ProposalCap:
    """GEPA stopper: stop once the proposer has been asked `limit` times. Each ask is one LLM session (the only kind
    GEPA calls), so a capped run is GEPA at a budget of LLM sessions as well as of rollouts. `fired` says whether it
    ended the run."""

    def __init__(self, adapter: SaddlerAdapter, limit: int) -> None:
        self.adapter, self.limit, self.fired = adapter, limit, False

    def __call__(self, gepa_state: Any) -> bool:
        self.fired = self.adapter.proposals >= self.limit
        return self.fired


class SaddlerAdapter:
    """`gepa.GEPAAdapter` over one saddler run: evaluate through its `Evaluator`, reflect on train evidence only,
    propose through its session backend (see the module docstring)."""

    def __init__(self, ctx: RunContext, schedule: Schedule) -> None:
        self.ctx, self.schedule = ctx, schedule
        self.nodes: dict[str, Node] = {}  # candidate key -> the first node with those files
        self.train_rows: dict[int, RolloutRow] = {}
        self.dev_done_at: dict[int, int] = {}  # node id -> search rollouts when its dev evaluation ended
        self.spent = self.blocked = self.proposals = 0

    def register(self, node: Node) -> dict[str, str]:
        candidate = candidate_of(self.ctx, node.commit)
        self.nodes.setdefault(candidate_key(candidate), node)
        return candidate

    def node(self, candidate: Mapping[str, str]) -> Node:
        found = self.nodes.get(candidate_key(candidate))
        if found is None:
            raise RuntimeError("GEPA asked for a candidate this driver never made (is merge on?)")
        return found

    # GEPAAdapter --------------------------------------------------------------------------------------
    propose_new_texts = None  # the proposer is passed as `custom_candidate_proposer`

    def evaluate(self, batch: list[Item], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa.core.adapter import EvaluationBatch

        ctx, node = self.ctx, self.node(candidate)
        (split,) = {item.split for item in batch}
        ids = [item.task_id for item in batch]
        before = ctx.store.count_rollouts(ctx.run_id)
        if split == "train":
            rows = ctx.eval_batch(node, ids)
            self.train_rows.update((r.id, r) for r in rows)
        else:
            index = ctx.task_index
            rows = ctx.evaluator.evaluate(node, [index[t] for t in ids], split, ctx.dev_seeds)
        spent = ctx.store.count_rollouts(ctx.run_id) - before
        self.spent += spent
        if split == "dev":
            self.dev_done_at.setdefault(node.id, self.spent)
        grouped = by_task(rows)
        scores = [sum(task_value(r, ctx.score_kind) for r in grouped[t]) / len(grouped[t]) for t in ids]
        traces = [grouped[t] for t in ids] if split == "train" else None  # dev never reaches the proposer
        outputs = [{"task_id": t, "score": s} for t, s in zip(ids, scores, strict=True)]
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=traces, num_metric_calls=spent)

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        rows = {r.id: r for task_rows in eval_batch.trajectories for r in task_rows}
        index = self.ctx.task_index
        records = [{"rollout_id": i, **evidence([r], index)[0].model_dump()} for i, r in sorted(rows.items())]
        return {component: records for component in components_to_update}

    # the proposer (GEPA's `custom_candidate_proposer`) --------------------------------------------------
    def propose(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> dict[str, str]:
        """One diagnosis-patch on the parent with the minibatch's train evidence and nothing else GEPA's proposer
        would not see (no memory of what was tried before); the texts of the kinds it changed, or {} when the
        backend finds no allowed patch or the change fails the loop's validation. Files GEPA already has are not
        made a second node: GEPA then evaluates the node it knows."""
        ctx, parent = self.ctx, self.node(candidate)
        ids = sorted({int(rec["rollout_id"]) for recs in reflective_dataset.values() for rec in recs})
        rows = [self.train_rows[i] for i in ids]
        number = self.schedule.iteration
        stalled = ctx.phases.stalled(self.schedule.decided_before(number))
        phase = ctx.phases.phase(*self.schedule.before, stalled=stalled)
        moved = ctx.phases.follow_evidence(phase, failure_kinds(rows, ctx.space.classify))  # as the loop does
        phase = moved[0] if moved else phase
        batch = sorted({r.task_id for r in rows})
        it = Iteration(id=0, run_id=ctx.run_id, number=number, epoch=0, batch=batch, parent_id=parent.id, phase=phase)
        ctx.space.clock = lambda: logical_commit_time(number)
        worktree = ctx.space.worktree(parent.commit, f"gepa-it{number}")
        self.proposals += 1
        try:
            request = diagnosis_request(ctx, it, parent, worktree, rows, 0, Excluded())
            result, staged = ctx.calls.diagnose(request, parent.id)
            hyp = result.hypothesis
            commit = None
            if result.status == "patched" and hyp is not None:
                message = f"gepa it{number}: {hyp.origin}: {hyp.plan[:60]}"
                commit = ctx.space.commit_worktree(worktree, message, tree=staged)
            event = {
                "iteration": number, "parent": parent.id, "phase": phase, "allowed_kinds": request.allowed_kinds,
                "evidence_tasks": batch, "status": result.status, "origin": hyp.origin if hyp else None,
                "phase_moved": moved[1] if moved else None,
            }  # fmt: skip
            if commit is None or hyp is None:
                self.blocked += 1
                self.schedule.decisions[number] = "no_patch"
                ctx.store.log_event("gepa.proposal", {**event, "reason": result.reason}, run_id=ctx.run_id)
                return {}
            texts = candidate_of(ctx, commit)
            known = self.nodes.get(candidate_key(texts))
            problems = [] if known is not None else validate(ctx, it, parent.commit, commit, worktree)
        finally:
            ctx.space.remove_worktree(worktree)
        node = known or self._child(parent, commit, it, hyp.model_dump(), problems)
        ctx.store.log_event("gepa.proposal", {**event, "node": node.id, "problems": problems}, run_id=ctx.run_id)
        if problems:
            self.schedule.decisions[number] = "invalid"
            return {}
        self.nodes.setdefault(candidate_key(texts), node)
        return {kind: text for kind, text in texts.items() if text != candidate[kind]}

    def _child(self, parent: Node, commit: str, it: Iteration, hypothesis: dict[str, Any], problems: list[str]) -> Node:
        store, space = self.ctx.store, self.ctx.space
        files = space.changed_files(parent.commit, commit)
        added, removed = space.numstat(parent.commit, commit)
        with store.transaction():
            node = store.add_node(
                self.ctx.run_id, commit, parent.id, it.number, it.phase, space.patch_kind(files),
                hypothesis["origin"], status="invalid" if problems else "pending", status_reason="; ".join(problems),
                hypothesis=hypothesis, lines_changed=added + removed,
            )  # fmt: skip
            store.add_edge(self.ctx.run_id, parent.id, node.id, "patch", space.diff(parent.commit, commit), files,
                           added, removed)  # fmt: skip
        return node

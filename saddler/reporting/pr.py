"""PR.md: the pull-request description of a run's answer (`saddler export RUN --branch`, and `best/PR.md` at the end
of a run). For the person who reviews and merges the change, never for a session (it quotes per-task dev and test).

Sections: a summary; per task, before (the baseline) and after (the exported node) on dev and test; each change with
its measured contribution (minimization's leave-one-out figure when the run has one, else the dev delta along the
lineage, child − parent, which is not a measure of what the change carries); lessons; risks (the cheat audit's
hits, tasks that regressed); cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from evodag.models import Node
from evodag.store import EvoDAG
from saddler.policies.audit import AUDIT_EVENT
from saddler.scoring import node_score, recorded_score_kind, task_scores


@dataclass(frozen=True)
class Change:
    """One commit of the hand-off branch: the lineage node it comes from, its message and what it carries.
    `contribution` is the dev points the change carries by minimization's measure (None without one), `dev_delta`
    the child − parent dev along the lineage."""

    node: Node
    subject: str
    body: str
    dev_delta: float | None
    contribution: float | None = None
    hunks: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        return f"{self.subject}\n\n{self.body}".rstrip() + "\n"


def lineage_changes(store: EvoDAG, target: Node) -> list[Change]:
    """The changes from the baseline to `target`, one per lineage edge, with their messages from the hypotheses."""
    lineage = store.lineage(target.id)
    out = []
    for parent, node in pairwise(lineage):
        hyp = node.hypothesis or {}
        edge = store.edge_into(node.id)
        kind = edge.kind if edge else node.patch_kind
        plan = str(hyp.get("plan", "")).strip().splitlines()
        subject = commit_subject(plan[0] if plan else f"{kind} ({node.origin})")
        lines = [f"saddler: {kind} {node.origin}, node n{node.id} of iteration {node.iteration} ({node.phase})."]
        if hyp.get("diagnosis"):
            lines += ["", f"Diagnosis: {hyp['diagnosis']}"]
        if hyp.get("target_tasks"):
            lines += ["", f"Targets: {', '.join(hyp['target_tasks'])}"]
        if edge:
            lines += ["", f"Files: {', '.join(edge.files_changed)} (+{edge.lines_added} -{edge.lines_removed})"]
        if edge and (edge.fixed or edge.regressed):
            lines += ["", f"Measured on train: fixed {', '.join(edge.fixed) or 'none'}; regressed "
                      f"{', '.join(edge.regressed) or 'none'}."]  # fmt: skip
        delta = None if node.dev_mean is None or parent.dev_mean is None else node.dev_mean - parent.dev_mean
        out.append(Change(node, subject, "\n".join(lines), delta))
    return out


def pr_title(store: EvoDAG, run_id: int, target: Node) -> str:
    base = store.get_node(store.get_run(run_id).baseline_node_id or target.id)
    return f"saddler: {_name(store, run_id)} dev {_f(base.dev_mean)} → {_f(target.dev_mean)}"


def render_pr(store: EvoDAG, run_id: int, target: Node, changes: list[Change], minimized: Any = None) -> str:
    """PR.md for `target` (the exported node) and its `changes`; `minimized` is the run's `Minimization` (None
    without one: the contributions then say how to measure them)."""
    run = store.get_run(run_id)
    kind = recorded_score_kind(run.config, run.inputs)
    base = store.get_node(run.baseline_node_id or target.id)
    tests = {n.id: node_score(store.rollouts(run_id, node_id=n.id, split="test"), kind) for n in (base, target)}
    out = [f"# {pr_title(store, run_id, target)}", "", "## Summary", ""]
    test_line = (
        f"test {tests[base.id].mean:.3f} → {tests[target.id].mean:.3f} ({len(tests[target.id].per_run)} run(s))"
        if tests[base.id].runs and tests[target.id].runs
        else "test: not evaluated"
    )
    out += [
        f"- run {_name(store, run_id)}; benchmark {run.config.get('benchmark', '?')}; score {kind}",
        f"- node n{target.id} ({target.status}) against the baseline n{base.id}: dev {_f(base.dev_mean)} → "
        f"{_f(target.dev_mean)}; {test_line}",
        f"- {len(changes)} change(s), one commit each" + (f"; minimized: {minimized.summary()}" if minimized else ""),
        "",
    ]
    out += _per_task_table(store, run_id, kind, base, target)
    out += ["## Changes", ""]
    if minimized is None:
        out += [
            "Measured contribution: not measured (`saddler minimize RUN` measures what each change carries by "
            "leaving it out); shown: the dev delta along the lineage (child − parent), which is not that.",
            "",
        ]
    for i, change in enumerate(changes, 1):
        measured = f"carries {change.contribution:+.3f} dev" if change.contribution is not None else "contribution: —"
        out.append(
            f"{i}. **{change.subject}** (n{change.node.id}): {measured}; lineage dev delta {_d(change.dev_delta)}"
        )
    out += ["", "## Lessons", ""]
    lessons = [
        lesson for change in changes for lesson in store.lessons(run_id, node_id=change.node.id, category="general")
    ]
    out += [f"- {lesson.text}" for lesson in lessons] or ["- none recorded"]
    out += ["", "## Risks", ""]
    out += _risks(store, run_id, kind, base, target, changes)
    out += ["", "## Cost", ""]
    rollout_cost, session_cost = store.rollout_cost(run_id), store.session_cost(run_id)
    out += [
        f"- {store.count_rollouts(run_id)} rollouts (${rollout_cost:.2f}), {store.count_sessions(run_id)} sessions "
        f"(${session_cost:.2f}); total ${rollout_cost + session_cost:.2f}",
        "",
    ]
    return "\n".join(out)


def _per_task_table(store: EvoDAG, run_id: int, kind: str, base: Node, target: Node) -> list[str]:
    """Per split, each task's score on the baseline and on `target`: the tasks that moved first."""
    out = ["## Per task (before → after)", ""]
    for split in ("dev", "test"):
        before, after = (task_scores(store.rollouts(run_id, node_id=n.id, split=split), kind) for n in (base, target))
        tasks = sorted(set(before) | set(after), key=lambda t: (before.get(t) == after.get(t), t))
        if not tasks:
            out += [f"{split}: not evaluated.", ""]
            continue
        moved = sum(1 for t in tasks if before.get(t) != after.get(t))
        out += [f"{split}: {moved} of {len(tasks)} task(s) moved.", "", "| task | before | after |", "|---|---|---|"]
        out += [f"| {t} | {_f(before.get(t))} | {_f(after.get(t))} |" for t in tasks]
        out.append("")
    return out


def _risks(store: EvoDAG, run_id: int, kind: str, base: Node, target: Node, changes: list[Change]) -> list[str]:
    ids = {c.node.id for c in changes} | {target.id}
    out = [
        f"- cheat audit, n{e.payload['node_id']}: {e.payload['reason']}"
        for e in store.events(run_id=run_id, kind=AUDIT_EVENT)
        if e.payload.get("node_id") in ids
    ]
    refused = sum(1 for e in store.events(run_id=run_id, kind=AUDIT_EVENT) if e.payload.get("refused"))
    if refused:
        out.append(f"- the cheat audit refused {refused} other candidate(s) of this run")
    for split in ("dev", "test"):
        before, after = (task_scores(store.rollouts(run_id, node_id=n.id, split=split), kind) for n in (base, target))
        worse = sorted(t for t in before if t in after and after[t] < before[t])
        if worse:
            out.append(f"- regressed on {split}: {', '.join(worse)}")
    return out or ["- no audit hit and no task regressed"]


def _name(store: EvoDAG, run_id: int) -> str:
    return str(store.get_run(run_id).config.get("name", "harness"))


def commit_subject(text: str, width: int = 72) -> str:
    """A commit subject: the first line, cut at a word and marked when longer than `width`."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    return text[: width - 1].rsplit(" ", 1)[0].rstrip(" ,;:(") + "…"


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _d(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"

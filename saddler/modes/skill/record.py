"""Skill mode into the EvoDAG: a run, a node per evaluated or rejected SKILL.md, edges with diffs, one rollout
per eval run, lessons per assertion change, a session per hypothesis, an iteration row per experiment."""

from __future__ import annotations

from benchmarks.skill_evals.grading import CaseResult
from evodag.decisions import SKILL_VERDICT_STATUS
from evodag.models import Node
from evodag.store import EvoDAG
from saddler.harness.space import HarnessSpace
from saddler.modes.skill.mutator import Mutation


def hypothesis_dict(m: Mutation, level: str | None) -> dict[str, object]:
    """The node's hypothesis in the shape reports read (diagnosis, plan, origin, subtype)."""
    return {
        "target_tasks": [m.target.split(":", 1)[0]],
        "diagnosis": m.analysis,
        "plan": m.plan,
        "patch_kind": "steering",
        "subtype": m.strategy_type,
        "files": ["SKILL.md"],
        "origin": f"{m.source}:{m.strategy_type}",
        "symptoms": [level or ""],
        "key": m.key,
    }


class SkillRecorder:
    """Writes one skill-mode run into `store` (the caller owns the store and the harness space)."""

    def __init__(self, store: EvoDAG, space: HarnessSpace, run_id: int, backend: str) -> None:
        self.store, self.space, self.run_id, self.backend = store, space, run_id, backend

    def baseline(self, commit: str, results: list[CaseResult], rate: float) -> Node:
        node = self.store.add_node(
            self.run_id,
            commit,
            None,
            0,
            "baseline",
            "baseline",
            "baseline",
            status="baseline",
            status_reason="original SKILL.md",
        )
        self.rollouts(node, results)
        node = self.store.update_node(node.id, batch_after=rate)
        self.store.update_run(self.run_id, baseline_node_id=node.id, best_node_id=node.id)
        return node

    def candidate(self, n: int, parent: Node, commit: str, m: Mutation, level: str | None, problems: list[str]) -> Node:
        """A node (invalid when `problems`) and its patch edge from `parent`."""
        added, removed = self.space.numstat(self.space.baseline_commit(), commit)
        with self.store.transaction():
            node = self.store.add_node(
                self.run_id,
                commit,
                parent.id,
                n,
                "steering",
                "steering",
                f"{m.source}:{m.strategy_type}",
                status="invalid" if problems else "pending",
                status_reason="; ".join(problems),
                hypothesis=hypothesis_dict(m, level),
                lines_changed=added + removed,
            )
            a, r = self.space.numstat(parent.commit, commit)
            self.store.add_edge(
                self.run_id,
                parent.id,
                node.id,
                "patch",
                self.space.diff(parent.commit, commit),
                self.space.changed_files(parent.commit, commit),
                a,
                r,
            )
        self.session(n, parent.id, m, "ok" if not problems else f"failed:{problems[0][:80]}")
        return node

    def session(self, n: int, parent_id: int, m: Mutation, outcome: str) -> None:
        """The mutator's session that proposed `m` (with what it cost), whatever became of `m`."""
        self.store.add_session(
            self.run_id,
            "diagnosis_patch",
            self.backend,
            iteration=n,
            node_id=parent_id,
            turns=1,
            cost_usd=m.cost_usd,
            outcome=outcome,
        )

    def rollouts(self, node: Node, results: list[CaseResult]) -> None:
        rows = []
        for r in results:
            for run in r.runs:
                failed = [a for a in run.assertions if not a["passed"]]
                rows.append({
                    "run_id": self.run_id, "node_id": node.id, "task_id": r.case.name, "split": "train",
                    "seed": run.seed, "repetition": run.run - 1,
                    "score": sum(run.vector) / len(run.vector) if run.vector else 0.0, "passed": not failed,
                    "disposition": "infra_error" if run.output.error else ("task_failure" if failed else "success"),
                    "cost": run.output.cost_usd, "error_tail": run.output.error, "task_group": r.case.name,
                    "rationale": "; ".join(f"{a['id']}: {a['evidence']}" for a in failed)[:1000],
                    "failure_file": "SKILL.md" if failed else None,
                    "cache_key": f"skill:{node.commit}:{r.case.name}:{run.run}",
                })  # fmt: skip
        self.store.add_rollouts(rows)

    def decided(
        self,
        node: Node,
        decision: str,
        reason: str,
        before: float,
        after: float,
        best_results: list[CaseResult],
        results: list[CaseResult],
        n: int,
        parent: Node,
    ) -> Node:
        """Store the candidate's rollouts, status, per-eval transitions and per-assertion lessons."""
        self.rollouts(node, results)
        node = self.store.update_node(
            node.id, status=SKILL_VERDICT_STATUS[decision], status_reason=reason, batch_before=before, batch_after=after
        )
        edge = self.store.edge_between(parent.id, node.id)
        old = {r.case.name: r for r in best_results}
        groups: dict[str, list[str]] = {"fixed": [], "regressed": [], "still_failing": [], "still_passing": []}
        with self.store.transaction():
            for r in results:
                was = all(old[r.case.name].passed_map.values())
                now = all(r.passed_map.values())
                key = ("still_passing" if now else "regressed") if was else ("fixed" if now else "still_failing")
                groups[key].append(r.case.name)
                for aid, passed in r.passed_map.items():
                    before_pass = old[r.case.name].passed_map.get(aid, False)
                    if passed == before_pass:
                        continue
                    attribution = "uncertain" if len(r.runs) > 2 else ("true_fix" if passed else "true_regression")
                    self.store.add_lesson(
                        self.run_id,
                        "fixed" if passed else "regressed",
                        attribution,
                        f"{r.case.name}/{aid}: {'FAIL -> PASS' if passed else 'PASS -> FAIL'} "
                        f"after {node.origin} ({decision})",
                        node_id=node.id,
                        edge_id=edge.id,
                        iteration=n,
                        task_id=r.case.name,
                    )
            self.store.add_lesson(
                self.run_id,
                "general",
                "uncertain",
                f"iteration {n}: {decision}: {reason}",
                node_id=node.id,
                edge_id=edge.id,
                iteration=n,
            )
        self.store.set_edge_transitions(edge.id, **groups)
        return node

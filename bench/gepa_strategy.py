"""Real GEPA (the `gepa` package, extra `bench`) as a strategy of bench/strategies.py, on saddler's own machinery.

GEPA runs its own loop (`gepa.optimize`: Pareto parent selection, epoch-shuffled minibatches, strict improvement
of the minibatch sum, a full val evaluation of every accepted child); everything it touches is saddler's, so a
rollout is the same cost unit as for every other strategy of the bench:

- a candidate is the text of the harness's editable files, one GEPA component per kind of the template's component
  map: `capability` and `steering`, each the JSON of {path: text} of the files of that kind (a bank patch may add a
  file, and GEPA's components are fixed by the seed candidate). Each candidate is a commit and a node of a real
  saddler run folder (`init_run`, the bench's shared rollout cache);
- evaluate runs (candidate, minibatch) through the run's `Evaluator` (train: `RunContext.eval_batch`, the loop's
  own call; val = dev with the dev seeds of `split_seeds`). It reports as metric calls the rollouts the store
  gained, so GEPA's `max_metric_calls` is a budget in saddler's rollouts: one re-read of a node's own rollout is
  free, one served from the shared cache is counted, as in every saddler run. GEPA's evaluation cache is on, with
  split-qualified example ids (`Item`), which avoids gepa-ai/gepa#424 (train and val ids collide in 0.1.4);
- the proposer is the run's session backend (`load_backend` of `[run.sessions]`, so backend options pass through
  `overrides`), asked for one diagnosis-patch in a worktree of the parent with the minibatch's train evidence only
  (`outcomes.evidence` refuses any other split) and the lineage's origins, but no memory of what was tried before
  (GEPA's proposer sees only the candidate and the minibatch), then validated as the loop validates; GEPA gets the
  new texts of the kinds that changed. With `phases` the allowed kinds are those of the run's phase schedule
  applied as the loop applies it: `PhaseSchedule.phase` on the train tasks shown to GEPA's minibatches (skipped
  ones included, as saddler counts batches its parent already passes) and its stall rule on GEPA's decisions,
  then `follow_evidence` on the parent's failures in the minibatch; without, both kinds always. GEPA has no
  plateau rule, so the proposer is never in exploration mode;
- GEPA stops at its budget, or after `IDLE_LIMIT` iterations in a row that spent nothing (`IdleStop`); the
  `_sessions` variants also stop once they have asked the proposer as many times as the default run of the same
  seed called LLM sessions (every role: `ProposalCap`), which compares them at what an LLM backend bills as well
  as at rollouts (the default's evolution and reflection sessions count, so GEPA gets ~3 proposals per default
  iteration);
- GEPA returns its best candidate on val; it and the baseline are evaluated on test (k seeds) after the search, and,
  for the bench only, every candidate of GEPA's pool too (`within_2pts_of_dag_best`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gepa_adapter import IdleStop, ProposalCap, SaddlerAdapter, Schedule, SplitLoader

from evodag.models import Node
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.errors import ConfigError, ExecutorError
from saddler.reporting.progress import NullProgress
from saddler.run.context import RunContext, open_context
from saddler.run.finish import evaluate_test
from saddler.run.folder import RunPaths, init_run, run_lock
from saddler.scoring import pass_at_1


@dataclass(frozen=True)
class Variant:
    """How a GEPA strategy runs: `phases`, its proposer follows saddler's phase schedule; `equal_sessions`, it also
    stops at the default run's LLM sessions of the same seed (`ProposalCap`)."""

    phases: bool
    equal_sessions: bool = False


VARIANTS = {
    "gepa": Variant(phases=False),
    "gepa_phases": Variant(phases=True),
    "gepa_sessions": Variant(phases=False, equal_sessions=True),
    "gepa_phases_sessions": Variant(phases=True, equal_sessions=True),
}
RESULT_FILE = "gepa-result.json"
NEAR_BEST = 0.02  # `within_2pts_of_dag_best`: the returned candidate's test within 2 points of the pool's best
REACH = 0.9
IDLE_LIMIT = 100  # iterations in a row that spend no rollout before GEPA is stopped (`IdleStop`); ~10 ms each
SEED_FIELDS = (
    "seed", "test", "baseline_test", "spent", "test_spent", "returned_dev", "reach", "charged_dev",
    "capability_in_returned", "saturated", "blocked", "accepted", "wall_s", "origins", "notes", "rejected",
    "ties_rejected", "ties_after_evidence", "good_rejected", "false_accepts", "dag_best_test", "evidence_rollouts",
    "kept_best_test",
)  # fmt: skip


@dataclass
class GepaOutcome:
    """One GEPA run's figures: `seed_fields()` are those `strategies.measure` gives every strategy, the rest GEPA's."""

    seed: int
    test: float
    baseline_test: float
    spent: int  # search rollouts (train + dev) the store gained
    test_spent: int  # test rollouts of the baseline and the returned candidate
    returned_dev: float
    reach: int | None
    capability_in_returned: int
    saturated: int  # minibatches the parent passed entirely (GEPA skips them)
    blocked: int  # proposals the proposer found no allowed patch for
    accepted: int  # candidates GEPA added to its pool
    wall_s: float = 0.0
    origins: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    charged_dev: int = 0  # GEPA evaluates val during the search: nothing is charged after it
    budget: int = 0
    stopped: str = ""  # max_metric_calls | idle (`IdleStop`) | max_proposals (`ProposalCap`)
    session_cap: int = 0  # the most proposals (LLM sessions) GEPA could ask for; 0: no cap
    metric_calls: int = 0  # GEPA's own count (equals `spent`)
    executed: int = 0  # search rollouts actually executed (the rest were served from a cache)
    proposals: int = 0
    decisions: dict[str, int] = field(default_factory=dict)  # GEPA's iterations by decision, in saddler's words
    pool_tests: list[float] = field(default_factory=list)  # test of every pool candidate (bench only)
    pool_test_rollouts: int = 0

    # what the bench measures of a saddler run's decisions, where GEPA has no counterpart: GEPA gathers no
    # evidence and stores no per-decision ties; its rejections are its own decisions in saddler's words
    @property
    def rejected(self) -> int:
        return self.decisions.get("rejected", 0)

    ties_rejected = ties_after_evidence = good_rejected = false_accepts = evidence_rollouts = 0

    @property
    def dag_best_test(self) -> float:
        return max(self.pool_tests, default=self.test)

    @property
    def kept_best_test(self) -> float:
        """GEPA keeps every candidate of its pool: the best it could have preferred is the pool's best."""
        return self.dag_best_test

    @property
    def within_2pts_of_dag_best(self) -> bool:
        return not self.pool_tests or self.test >= max(self.pool_tests) - NEAR_BEST - 1e-9

    def seed_fields(self) -> dict[str, Any]:
        """The fields of `strategies.SeedResult` (what `measure()` returns for a saddler run)."""
        return {name: getattr(self, name) for name in SEED_FIELDS}


class _Log:
    """GEPA's logger: its lines are kept and written to the run folder's gepa.log."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(str(message))


def run_gepa(
    run_dir: Path,
    *,
    template: str,
    seed: int,
    budget: int,
    phases: bool,
    overrides: dict[str, Any] | None = None,
    pool_on_test: bool = True,
    max_proposals: int = 0,
) -> GepaOutcome:
    """GEPA on a fresh saddler run folder `run_dir` of `template`, for `budget` search rollouts (its
    `max_metric_calls`) and, when `max_proposals` > 0, at most that many proposals; `overrides` are `[run]` settings
    (the shared cache, backend options), as `init_run` takes them. The returned candidate and the baseline are
    evaluated on test; with `pool_on_test`, the whole pool too."""
    import gepa

    started = time.monotonic()
    sets: dict[str, Any] = json.loads(json.dumps(overrides or {}))
    if not phases:
        sets.setdefault("policies", {})["phases"] = "none"
    init_run(run_dir, template=template, seed=seed, force=True, overrides=sets)
    paths = RunPaths(Path(run_dir).resolve())
    cfg = load_run_config(paths.root)
    if cfg.loop.dev_runs != 1:
        raise ConfigError("run.loop.dev_runs: GEPA counts one metric call per val example; set it to 1")
    log = _Log()
    with run_lock(paths.root), EvoDAG(paths.db) as store:
        ctx = open_context(paths, cfg, store, NullProgress())
        try:
            baseline = store.add_node(ctx.run_id, ctx.space.baseline_commit(), None, 0, "baseline", "baseline",
                                      "baseline", status="baseline")  # fmt: skip
            store.update_run(ctx.run_id, baseline_node_id=baseline.id, best_node_id=baseline.id)
            schedule, idle = Schedule(), IdleStop(IDLE_LIMIT)
            adapter = SaddlerAdapter(ctx, schedule)
            cap = ProposalCap(adapter, max_proposals)
            seed_candidate = adapter.register(baseline)
            result: Any = gepa.optimize(
                seed_candidate=seed_candidate,
                trainset=SplitLoader("train", [t.id for t in ctx.tasks["train"]]),
                valset=SplitLoader("dev", [t.id for t in ctx.tasks["dev"]]),
                adapter=adapter,  # type: ignore[arg-type]  # duck-typed: GEPA's Protocol is generic in types we do not name
                custom_candidate_proposer=adapter.propose,
                module_selector="all",  # a bank patch may touch both kinds; the phase decides which it may
                reflection_minibatch_size=cfg.loop.batch_size,
                max_metric_calls=budget,
                stop_callbacks=[idle, cap] if max_proposals > 0 else [idle],
                cache_evaluation=True,
                track_best_outputs=False,
                logger=log,
                callbacks=[schedule],  # type: ignore[list-item]  # duck-typed GEPACallback (only the hooks it uses)
                seed=seed,
            )
            stopped = "idle" if idle.fired else "max_proposals" if cap.fired else "max_metric_calls"
            outcome = _measure(ctx, adapter, result, baseline, pool_on_test)
            store.update_run(ctx.run_id, status="finished", termination_reason=stopped, finished_at=store.clock())
            if idle.fired:
                outcome.notes.append(f"stopped after {IDLE_LIMIT} iterations in a row that spent no rollout")
            outcome.budget, outcome.stopped, outcome.session_cap = budget, stopped, max_proposals
            outcome.wall_s = time.monotonic() - started
            return outcome
        finally:
            (paths.root / "gepa.log").write_text("\n".join(log.lines) + "\n", encoding="utf-8")
            ctx.executor.close()
            ctx.space.prune()
            ctx.space.close()


def _measure(ctx: RunContext, adapter: SaddlerAdapter, result: Any, baseline: Node, pool: bool) -> GepaOutcome:
    """The figures of a finished search; test is evaluated here (baseline, returned, then the pool if `pool`)."""
    store = ctx.store
    spent, executed = store.count_rollouts(ctx.run_id), ctx.evaluator.executed_count
    if all(r.disposition == "infra_error" for r in store.rollouts(run_id=ctx.run_id)):
        raise ExecutorError(f"all {spent} search rollouts failed to run (infra_error); see {ctx.paths.traces}")
    pool_nodes = [adapter.node(c) for c in result.candidates]
    scores = list(result.val_aggregate_scores)
    returned = pool_nodes[result.best_idx]
    for node, score in zip(pool_nodes[1:], scores[1:], strict=True):
        if node.id != baseline.id:
            store.update_node(node.id, status="accepted", dev_mean=score)
    store.update_node(baseline.id, dev_mean=scores[0])
    kept = {n.id for n in pool_nodes}
    for node in store.nodes(run_id=ctx.run_id, status="pending"):
        if node.id not in kept:
            store.update_node(node.id, status="rejected", status_reason="GEPA: not better on its minibatch")
    store.update_run(ctx.run_id, best_node_id=returned.id)

    def test_of(node: Node) -> float:
        evaluate_test(ctx, node)
        return pass_at_1(store.rollouts(run_id=ctx.run_id, node_id=node.id, split="test")).mean

    baseline_test, test = test_of(baseline), test_of(returned)
    test_spent = store.count_rollouts(ctx.run_id) - spent
    pool_tests = [test_of(n) for n in pool_nodes] if pool else []
    pool_test_rollouts = store.count_rollouts(ctx.run_id) - spent - test_spent
    lineage = store.lineage(returned.id)
    notes = []
    if result.total_metric_calls != spent:
        notes.append(f"GEPA counted {result.total_metric_calls} metric calls, the store holds {spent} search rollouts")
    return GepaOutcome(
        seed=ctx.cfg.seed,
        test=test,
        baseline_test=baseline_test,
        spent=spent,
        test_spent=test_spent,
        returned_dev=scores[result.best_idx],
        reach=_reach([adapter.dev_done_at[n.id] for n in pool_nodes], scores),
        capability_in_returned=sum(1 for n in lineage if n.patch_kind == "capability"),
        saturated=adapter.schedule.saturated,
        blocked=adapter.blocked,
        accepted=len(pool_nodes) - 1,
        origins=[(n.origin, n.patch_kind) for n in lineage[1:]],
        notes=notes,
        metric_calls=int(result.total_metric_calls),
        executed=executed,
        proposals=adapter.proposals,
        decisions=dict(sorted(Counter(str(d) for d in adapter.schedule.decisions.values()).items())),
        pool_tests=pool_tests,
        pool_test_rollouts=pool_test_rollouts,
    )


def _reach(known_at: list[int], scores: list[float]) -> int | None:
    """Search rollouts until the candidate GEPA would have returned then (best val so far, the first on ties, as
    `GEPAResult.best_idx`) reaches 90 % of the returned one's val score."""
    best = 0
    for i, position in enumerate(known_at):  # the pool in the order GEPA added it
        best = i if scores[i] > scores[best] else best
        if scores[best] >= REACH * max(scores) - 1e-12:
            return position
    return None


def bench_seed(
    name: str, seed: int, budget: int, out: Path, cache: Path, reuse: bool, *, template: str = "opsdesk",
    overrides: dict[str, Any] | None = None, sessions: int = 0,
) -> GepaOutcome:  # fmt: skip
    """Strategy `name` of `VARIANTS` on one seed, in `out/<name>-s<seed>` with the bench's shared `cache`, for
    `budget` rollouts and, for an `equal_sessions` variant, at most `sessions` proposals (the default run's LLM
    sessions); with `reuse`, the outcome a finished run saved there for the same budget and cap is read back."""
    variant = VARIANTS[name]
    cap = sessions if variant.equal_sessions else 0
    if variant.equal_sessions and cap <= 0:
        raise ConfigError(f"{name}: a session cap needs the default run's LLM sessions of seed {seed}")
    run_dir = out / f"{name}-s{seed}"
    saved = run_dir / RESULT_FILE
    if reuse and saved.exists():
        data = json.loads(saved.read_text(encoding="utf-8"))
        if data.get("budget") == budget and data.get("session_cap", 0) == cap:
            data["origins"] = [tuple(o) for o in data["origins"]]
            return GepaOutcome(**data)
    sets = json.loads(json.dumps(overrides or {}))
    sets.setdefault("executor", {})["cache"] = str(cache)
    outcome = run_gepa(run_dir, template=template, seed=seed, budget=budget, phases=variant.phases, overrides=sets,
                       max_proposals=cap)  # fmt: skip
    saved.write_text(json.dumps(dataclasses.asdict(outcome), indent=1), encoding="utf-8")
    return outcome


def installed() -> bool:
    """Whether the `gepa` package (extra `bench`) can be imported."""
    return importlib.util.find_spec("gepa") is not None

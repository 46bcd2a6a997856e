"""One strategy on one seed of one benchmark: run it (or reuse the finished run), then measure it the same way as
every other strategy. Used by `bench/strategies.py`; see its docstring for what each figure means.

After a run the bench (never the run itself) evaluates every valid node of the DAG on test, k = the run's
`test_runs` seeds, through the shared rollout cache: that gives the false accepts (a kept candidate, accepted or
kept as a stepping stone, whose test is below its parent's) and whether the node the strategy returned is within 2
points of its DAG's best. The rows it adds come after the run's own (`bench-posthoc.json` records where they
start), so they are never counted as the run's spending.

The DAG's best may be a node only test favours. So the bench also evaluates on dev (the run's dev seeds) every node
more than 2 points above the returned one on test, and asks which of them the run's own dev rule clearly ranks above
the returned node (paired over the dev tasks, P(better) at least `policies.acceptance_confidence`): the best test
among those is `dev_reachable_test`, what a search and selection that decide on train and dev could have returned.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evodag.decisions import KEPT_DECISIONS, REJECTED
from evodag.decisions import KEPT_STATUSES as KEPT
from evodag.models import Iteration, Node, RolloutRow
from evodag.recording import SESSION_ROLES
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.minimized import ORIGIN as MINIMIZED
from saddler.policies.acceptance import TaskOutcome, better_confidence, clearly_better, clearly_worse, task_outcomes
from saddler.policies.ranking import pick_best
from saddler.run.folder import init_run
from saddler.run.loop import Optimizer
from saddler.run.ops import evaluate_node, evaluate_nodes
from saddler.run.outcomes import split_seeds
from saddler.scoring import pass_at_1

REACH = 0.9
DIAGNOSIS = "diagnosis_patch"  # the role of a session that proposes a patch
assert DIAGNOSIS in SESSION_ROLES
POSTHOC = "bench-posthoc.json"
PASS_RATE = "pass_rate"  # the scale of every test figure the bench reads
NEAR = 0.02  # "within 2 points": how far below a better node's test a returned node may be


def near(test: float, best: float) -> bool:
    """Whether `test` is within `NEAR` of `best` (or above it)."""
    return test >= best - NEAR - 1e-9


@dataclass
class SeedResult:
    seed: int
    test: float
    baseline_test: float
    spent: int
    test_spent: int
    returned_dev: float
    reach: int | None
    charged_dev: int
    capability_in_returned: int
    saturated: int
    blocked: int
    accepted: int
    rejected: int
    ties_rejected: int  # rejected on a tie of the batch alone (no evidence gathered)
    ties_after_evidence: int  # rejected on a tie that the gathered evidence did not break
    good_rejected: int  # rejected candidates whose patch belongs to the bank's best combination
    false_accepts: int
    dag_best_test: float
    kept_best_test: float  # the best test among the nodes the run kept: those its own evidence favoured
    evidence_rollouts: int
    wall_s: float = 0.0
    unminimized_test: float | None = None  # test of the full best the minimization started from (None: not run)
    dag_best_kept: bool | None = None  # whether the DAG's best node on test is one the run kept
    sessions: int | None = None  # LLM sessions the run called (every role): what a user pays besides rollouts
    proposals: int | None = None  # of which diagnosis sessions: the candidate patches proposed
    origins: list[tuple[str, str]] = field(default_factory=list)  # (origin, patch kind) root..returned
    notes: list[str] = field(default_factory=list)
    dev_reachable_test: float | None = None  # the best test among nodes dev clearly ranks above the returned one
    clear_false_accepts: int | None = None  # false accepts clearly lower on test (None: records made before)

    @property
    def within_2pts(self) -> bool:
        return near(self.test, self.dag_best_test)

    @property
    def within_2pts_unminimized(self) -> bool:
        """Whether the full best (before the minimization cut anything) is within 2 points of the DAG's best."""
        test = self.test if self.unminimized_test is None else self.unminimized_test
        return near(test, self.dag_best_test)

    @property
    def within_2pts_of_kept(self) -> bool:
        """Within 2 points of the best node the run could have preferred: of those its train or dev evidence kept
        (a rejected node that helps only on held-out tasks is out of any held-in rule's reach)."""
        return near(self.test, self.kept_best_test)

    @property
    def within_2pts_of_dev_reachable(self) -> bool | None:
        """Within 2 points of every node the run's own dev rule clearly ranks above the returned one (None: not
        measured, as in records made before the bench measured it)."""
        return None if self.dev_reachable_test is None else near(self.test, self.dev_reachable_test)


def trajectory(nodes: dict[int, Node], known_at: dict[int, int], dev_seen: set[int]) -> list[tuple[int, int]]:
    """(position, node the strategy would return) each time the answer may change: a kept node becomes known
    (with its dev score if the strategy measured it by then). `pick_best` is the loop's own rule."""
    order = sorted((pos, nid) for nid, pos in known_at.items() if nodes[nid].status in KEPT)
    out: list[tuple[int, int]] = []
    known: list[Node] = []
    for pos, nid in order:
        node = nodes[nid]
        known.append(node if nid in dev_seen else Node(**{**vars(node), "dev_mean": None}))
        best = pick_best(known)
        if best is not None and (not out or out[-1][1] != best.id):
            out.append((pos, best.id))
    return out


def settled_at(search: list[RolloutRow], baseline: int | None) -> dict[int, int]:
    """Per node, the search position (1-based rollout count) when its verdict was known: the end of its dev
    evaluation if it had one, else the end of its first evaluation (the candidate's own batch and evidence; later
    rows of the same node are its evaluations as a parent). The baseline without dev is known from the start."""
    first_end: dict[int, int] = {}
    closed: set[int] = set()
    last_dev: dict[int, int] = {}
    for position, row in enumerate(search, start=1):
        nid = row.node_id
        if nid not in first_end or (nid not in closed and first_end[nid] == position - 1):
            first_end[nid] = position  # one evaluation's rows are contiguous: still the first one
        else:
            closed.add(nid)
        if row.split == "dev":
            last_dev[nid] = position
    known = {nid: last_dev.get(nid, end) for nid, end in first_end.items()}
    if baseline is not None and baseline not in last_dev:
        known[baseline] = 0
    return known


def posthoc_tests(run_dir: Path, runs: int) -> dict[int, float]:
    """Test Pass@1 of every valid node of the finished run, whatever per-task score the run ranked on: the scale of
    the returned node's test (the bench's own evaluation, cached in POSTHOC; a cache of another scale is redone)."""
    marker = run_dir / POSTHOC
    done = json.loads(marker.read_text()) if marker.exists() else {}
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        first = done.get("first_rollout", store.last_rollout_id() + 1)
        nodes = [n.id for n in store.nodes() if n.status not in ("invalid", "pending")]
    same_scale = done.get("score") == PASS_RATE
    tests = {int(k): float(v) for k, v in done.get("test", {}).items()} if same_scale else {}
    if not marker.exists():  # where the run's own rows end, written before any post-hoc row is
        marker.write_text(json.dumps({"first_rollout": first, "score": PASS_RATE, "test": tests}))
    missing = [n for n in nodes if n not in tests]
    if missing:
        found = evaluate_nodes(run_dir, missing, "test", runs, quiet=True, score_kind=PASS_RATE)
        tests |= {nid: float(f["mean"]) for nid, f in found.items()}
        marker.write_text(json.dumps({"first_rollout": first, "score": PASS_RATE, "test": tests}))
    return tests


def dev_reachable_test(run_dir: Path, returned: int, tests: dict[int, float], dev_runs: int) -> float:
    """The best post-hoc test among the nodes the run's own dev rule clearly ranks above `returned` (paired over the
    dev tasks at the run's `dev_runs` dev seeds, P(better) at least `policies.acceptance_confidence`), or
    `returned`'s own test when there is none. Only nodes more than 2 points above it on test are evaluated (no
    other can make a miss); their dev rows come after the run's own, as every post-hoc row does."""
    above = sorted(n for n, t in tests.items() if not near(tests[returned], t))
    if not above:
        return tests[returned]
    cfg = load_run_config(run_dir)
    evaluate_nodes(run_dir, [returned, *above], "dev", dev_runs, quiet=True, score_kind=PASS_RATE)
    seeds = set(split_seeds(cfg.seed, "dev", dev_runs))
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        dev = {
            n: task_outcomes(r for r in store.rollouts(node_id=n, split="dev") if r.seed in seeds)
            for n in [returned, *above]
        }
    conf = cfg.policies.acceptance_confidence
    clear = [tests[n] for n in above if clearly_better(paired_confidence(dev[n], dev[returned]), conf)]
    return max([tests[returned], *clear])


def paired_confidence(after: dict[str, TaskOutcome], before: dict[str, TaskOutcome]) -> float:
    """P(better) of `after` over `before`, paired task by task on the tasks both hold (Pass@1 per task), as the
    run's acceptance decides: `better_confidence` of the summed per-task wins and losses."""
    diffs = [after[t].value(PASS_RATE) - before[t].value(PASS_RATE) for t in after if t in before]
    return better_confidence(sum(d for d in diffs if d > 0), -sum(d for d in diffs if d < 0))


def measure(run_dir: Path, dev_runs: int, test_runs: int) -> SeedResult:
    """Every figure of one finished run (post-hoc evaluations happen after the counts)."""
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        run = store.get_run()
        returned = run.best_node_id
        assert returned is not None, f"{run_dir} has not finished"
        marker = run_dir / POSTHOC
        end_of_run = json.loads(marker.read_text())["first_rollout"] if marker.exists() else store.last_rollout_id() + 1
        rows = sorted((r for r in store.rollouts() if r.id < end_of_run), key=lambda r: r.id)
        nodes = {n.id: n for n in store.nodes()}
        iterations = store.iterations()
        lineage = store.lineage(returned)
    n_dev = len({r.task_id for r in rows if r.split == "dev"}) or 40
    end = min((r.id for r in rows if r.split == "test"), default=rows[-1].id + 1 if rows else 0)
    search = [r for r in rows if r.id < end and r.split != "test"]
    known_at = settled_at(search, run.baseline_node_id)
    dev_seen = {r.node_id for r in search if r.split == "dev"}
    path = trajectory(nodes, known_at, dev_seen)
    notes = [] if path and path[-1][1] == returned else [f"trajectory ends at n{path[-1][1] if path else '-'}"]
    dev: dict[int, float] = {nid: nodes[nid].dev_mean or 0.0 for nid in dev_seen if nodes[nid].dev_mean is not None}
    charged, reach = 0, None
    cost: list[int] = []
    for _, nid in path:
        if nid not in dev:  # a dev-blind strategy's answer: measured now, and charged
            dev[nid] = evaluate_node(run_dir, nid, "dev", dev_runs, quiet=True)["mean"]
            charged += n_dev * dev_runs
        cost.append(charged)
    final = dev[returned] if returned in dev else dev[path[-1][1]]
    for (position, nid), paid in zip(path, cost, strict=True):
        if dev[nid] >= REACH * final - 1e-12:
            reach = position + paid
            break
    test_rows = [r for r in rows if r.split == "test"]
    base = nodes[run.baseline_node_id or returned]
    test, baseline_test = (pass_at_1(r for r in test_rows if r.node_id == n.id).mean for n in (nodes[returned], base))
    tests = posthoc_tests(run_dir, test_runs)
    dag_best = max(tests, key=lambda n: (tests[n], -n)) if tests else None  # the first of the best on test
    decided = [it for it in iterations if it.candidate_id is not None and it.decision in (*KEPT_DECISIONS, REJECTED)]
    rejected = [it for it in decided if it.decision == REJECTED]
    ties = [it for it in rejected if _tied(it.evidence, nodes[it.candidate_id or 0]) and not _dev_vetoed(it.evidence)]
    on_batch_alone = [it for it in ties if not (it.evidence or {}).get("rounds_run")]
    good = set(best_combination(run_dir))
    below = false_accept_pairs(iterations, tests)
    confidence = load_run_config(run_dir).policies.acceptance_confidence  # clear: `clearly_worse` at it
    return SeedResult(
        seed=run.seed,
        test=test,
        baseline_test=baseline_test,
        spent=len(search),
        test_spent=len(test_rows),
        returned_dev=final,
        reach=reach,
        charged_dev=charged,
        capability_in_returned=sum(1 for n in lineage if n.patch_kind == "capability"),
        saturated=sum(1 for it in iterations if it.decision == "no_training_failures"),
        blocked=sum(1 for it in iterations if it.decision == "no_patch" and it.parent_id is not None),
        accepted=sum(1 for it in decided if it.decision in KEPT_DECISIONS),
        rejected=len(rejected),
        ties_rejected=len(on_batch_alone),
        ties_after_evidence=len(ties) - len(on_batch_alone),
        good_rejected=sum(1 for it in rejected if nodes[it.candidate_id or 0].origin.removeprefix("bank:") in good),
        false_accepts=len(below),
        clear_false_accepts=sum(1 for p in test_confidences(run_dir, below, test_runs) if clearly_worse(p, confidence)),
        dag_best_test=test if dag_best is None else tests[dag_best],
        kept_best_test=max((t for n, t in tests.items() if nodes[n].status in KEPT), default=test),
        evidence_rollouts=sum(int((it.evidence or {}).get("rollouts", 0)) for it in iterations),
        origins=[(n.origin, n.patch_kind) for n in lineage[1:]],
        notes=notes,
        unminimized_test=_unminimized_test(nodes, returned, tests),
        **session_counts(run_dir),
        dag_best_kept=None if dag_best is None else nodes[dag_best].status in KEPT,
        dev_reachable_test=dev_reachable_test(run_dir, returned, tests, dev_runs) if returned in tests else None,
    )


def false_accept_pairs(iterations: list[Iteration], tests: dict[int, float]) -> list[tuple[int, int]]:
    """(parent, candidate) of every candidate the run kept (accepted, or kept as a stepping stone) whose post-hoc
    test is below its parent's, by any amount: the false accepts."""
    return [
        (it.parent_id, it.candidate_id)
        for it in iterations
        if it.decision in KEPT_DECISIONS
        and it.parent_id is not None
        and it.candidate_id is not None
        and it.parent_id in tests
        and it.candidate_id in tests
        and tests[it.candidate_id] < tests[it.parent_id] - 1e-9
    ]


def test_confidences(run_dir: Path, pairs: list[tuple[int, int]], test_runs: int) -> list[float]:
    """Per (parent, candidate) of `pairs`, the candidate's P(better) over its parent on test (`paired_confidence`
    over the test tasks at the run's `test_runs` test seeds, whose post-hoc rows `posthoc_tests` stored)."""
    seeds = set(split_seeds(load_run_config(run_dir).seed, "test", test_runs))
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        on_test = {
            n: task_outcomes(r for r in store.rollouts(node_id=n, split="test") if r.seed in seeds)
            for n in {n for pair in pairs for n in pair}
        }
    return [paired_confidence(on_test[c], on_test[p]) for p, c in pairs]


def session_counts(run_dir: Path) -> dict[str, int]:
    """`sessions` (every LLM session the run stored, any role) and `proposals` (its diagnosis sessions): with an LLM
    backend each is paid in tokens, so a strategy that proposes more for the same rollouts costs more."""
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        rows = store.sessions()
    return {"sessions": len(rows), "proposals": sum(1 for r in rows if r.role == DIAGNOSIS)}


def _unminimized_test(nodes: dict[int, Node], returned: int, tests: dict[int, float]) -> float | None:
    """Test of the full best harness: the returned node itself unless the minimization made it, then its nearest
    ancestor the minimization did not make."""
    node = nodes[returned]
    while node.origin == MINIMIZED and node.parent_id is not None:
        node = nodes[node.parent_id]
    return tests.get(node.id)


def best_combination(run_dir: Path) -> list[str]:
    """The bank patches of the run's benchmark that make its best harness (bench-only knowledge, from bank.json)."""
    return bank_best(load_run_config(run_dir).benchmark)


def bank_best(benchmark: str) -> list[str]:
    """The bank patches that make bundled `benchmark`'s best known harness (its bank.json; none without one)."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / benchmark / "patch_bank" / "bank.json"
    return list(json.loads(path.read_text()).get("best_combination", [])) if path.exists() else []


def _dev_vetoed(evidence: dict[str, Any] | None) -> bool:
    return bool(evidence and "dev_guard" in evidence and evidence.get("verdict") == "accepted")


def _tied(evidence: dict[str, Any] | None, cand: Node) -> bool:
    """A rejection on a tie: no task moved either way over everything the decision compared."""
    if evidence and "wins" in evidence:
        return float(evidence["wins"]) == 0.0 and float(evidence["losses"]) == 0.0
    return cand.batch_before is not None and cand.batch_before == cand.batch_after


def finished(run_dir: Path) -> bool:
    if not (run_dir / "evodag.sqlite").exists():
        return False
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        return store.get_run().status == "finished"


def run_one(
    template: str,
    overrides: dict[str, Any],
    seed: int,
    iterations: int,
    run_dir: Path,
    cache: Path,
    reuse: bool,
) -> SeedResult:
    """Run one strategy (its config `overrides`) on one seed of `template`, or measure the finished run already in
    `run_dir` (`reuse`)."""
    from saddler.config import load_run_config

    started = time.monotonic()
    if not (reuse and finished(run_dir)):
        if not (reuse and (run_dir / "evodag.sqlite").exists()):  # an interrupted run of --reuse resumes instead
            sets: dict[str, Any] = {"loop": {"max_iterations": iterations}, "executor": {"cache": str(cache)}}
            for key, table in overrides.items():
                sets.setdefault(key, {}).update(table)
            init_run(run_dir, template=template, seed=seed, force=True, overrides=sets)
            (run_dir / POSTHOC).unlink(missing_ok=True)
        Optimizer(run_dir, quiet=True).run()
    cfg = load_run_config(run_dir)
    result = measure(run_dir, cfg.loop.dev_runs, cfg.loop.test_runs)
    result.wall_s = time.monotonic() - started
    return result

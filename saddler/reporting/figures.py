"""End-of-run figures (`build_report`) and `report.md` (`write_report`), read from the EvoDAG only.

The run's score kind (`policies.score` as stored in the run's config: `pass_rate` or `mean_score`) decides the
test figure: per test run the mean over tasks of `passed` (Pass@1) or of the graded score; a node's test
figure is the mean ± population std over its k runs. Dev figures are the node rows' `dev_mean`/`dev_std`.
When the benchmark declared its own metric (the `benchmark.described` event), the summary also gives that
metric per node on dev and test, read back from the rollout scores.
Every float in the figures is rounded to 6 decimals so the dict is stable JSON.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from evodag.decisions import KEPT_DECISIONS
from evodag.history import metric_keys
from evodag.metric import delta_text, run_metric, scale_of, score_text
from evodag.models import Node, RolloutRow
from evodag.store import EvoDAG
from saddler import scoring
from saddler.benchmark import MetricScale
from saddler.files import atomic_path, write_text_atomic
from saddler.minimized import ORIGIN as MINIMIZE_ORIGIN
from saddler.reporting.decisions import decisions
from saddler.reporting.minimized_report import minimized_figures

DIAGNOSIS_KINDS = ("capability", "steering", "mixed", "unclassified")
EVOLUTION_KINDS = ("rebase", "cherry_pick", "revert", "merge")


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def described_metric(store: EvoDAG, run_id: int) -> MetricScale | None:
    """The benchmark's own metric as the run recorded it at its start, or None."""
    for ev in store.events(run_id=run_id, kind="benchmark.described"):
        scale = scale_of(ev.payload.get("metric"))
        if scale is not None:
            return scale
    return None


def _metric_summary(
    store: EvoDAG,
    run_id: int,
    base: Node | None,
    best: Node | None,
    test_rows: tuple[list[RolloutRow], list[RolloutRow]],
) -> dict[str, Any] | None:
    """The benchmark's own metric, baseline against best, on test (`test_rows`: their test rollouts) and dev."""
    scale = described_metric(store, run_id)
    if scale is None:
        return None

    def mean(node: Node | None, rows: list[RolloutRow]) -> float | None:
        if node is None:
            return None
        value = scoring.metric_mean(rows, scale)
        return None if value is None else round(value, 9)

    def dev_rows(node: Node | None) -> list[RolloutRow]:
        return store.rollouts(run_id, node_id=node.id, split="dev") if node else []

    out: dict[str, Any] = {"name": scale.name, "direction": scale.direction, "label": scale.label}
    for split, (base_rows, best_rows) in (("test", test_rows), ("dev", (dev_rows(base), dev_rows(best)))):
        b, f = mean(base, base_rows), mean(best, best_rows)
        out[split] = {"baseline": b, "final": f, "delta": None if b is None or f is None else round(f - b, 9)}
    return out


def hypothesis_summary(node: Node, limit: int = 100) -> str:
    """One line: the hypothesis plan (else diagnosis, else evolution rationale), else the node's origin."""
    hyp = node.hypothesis or {}
    text = " ".join(str(hyp.get("plan") or hyp.get("diagnosis") or hyp.get("evolution") or "").split())
    if not text:
        return node.origin
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dev_parent(nodes: dict[int, Node], node: Node) -> float | None:
    """The dev mean of the nearest ancestor that was evaluated on dev (None when the node has no dev mean)."""
    if node.dev_mean is None:
        return None
    ancestor = nodes.get(node.parent_id) if node.parent_id is not None else None
    while ancestor is not None and ancestor.dev_mean is None:
        ancestor = nodes.get(ancestor.parent_id) if ancestor.parent_id is not None else None
    return None if ancestor is None else ancestor.dev_mean


def _mutation(
    nodes: dict[int, Node], node: Node, scales: tuple[MetricScale | None, MetricScale | None]
) -> dict[str, Any]:
    hyp = node.hypothesis or {}
    delta = None
    if node.batch_before is not None and node.batch_after is not None:
        delta = _r(node.batch_after - node.batch_before)
    return {
        "node": node.id,
        "iteration": node.iteration,
        "commit": node.commit,
        "status": node.status,
        "patch_kind": node.patch_kind,
        "subtype": hyp.get("subtype") or "",
        "origin": node.origin,
        "hypothesis": hypothesis_summary(node),
        "batch_before": _r(node.batch_before),
        "batch_after": _r(node.batch_after),
        "batch_delta": delta,
        "dev_mean": _r(node.dev_mean),
        "dev_before": _r(_dev_parent(nodes, node)),
        "dev_delta": _delta(_dev_parent(nodes, node), node.dev_mean),
        # as a person reads them: in the run's metric when it has one (from the unrounded scores)
        "batch_delta_text": delta_text(node.batch_before, node.batch_after, scales[1]),
        "dev_delta_text": delta_text(_dev_parent(nodes, node), node.dev_mean, scales[0]),
    }


def _per_task(base_rows: list[RolloutRow], best_rows: list[RolloutRow]) -> list[dict[str, Any]]:
    """Per test task, baseline against best (`base_rows`, `best_rows`: their test rollouts). Where on the lineage a
    test task changed is unknown by construction: only the baseline and the best are run on test."""
    groups: dict[str, str] = {}
    tally: dict[tuple[int, str], list[bool]] = defaultdict(list)
    for which, rows in ((0, base_rows), (1, best_rows)):
        for row in rows:
            groups.setdefault(row.task_id, row.task_group)
            tally[(which, row.task_id)].append(row.passed)
    out = []
    for task in sorted(groups):
        before, after = tally[(0, task)], tally[(1, task)]
        b_rate = sum(before) / len(before) if before else None
        a_rate = sum(after) / len(after) if after else None
        change = "same"
        if b_rate is not None and a_rate is not None and a_rate != b_rate:
            change = "fixed" if a_rate > b_rate else "regressed"
        out.append(
            {
                "task": task,
                "group": groups[task],
                "baseline": _r(b_rate),
                "baseline_passes": sum(before),
                "baseline_runs": len(before),
                "final": _r(a_rate),
                "final_passes": sum(after),
                "final_runs": len(after),
                "change": change,
            }
        )
    return out


def _failed(store: EvoDAG, run_id: int, candidates: list[Node]) -> list[dict[str, Any]]:
    out = []
    for node in candidates:
        if node.status in ("invalid", "rejected"):
            out.append(
                {
                    "iteration": node.iteration,
                    "node": node.id,
                    "origin": node.origin,
                    "patch_kind": node.patch_kind,
                    "hypothesis": hypothesis_summary(node),
                    "status": node.status,
                    "reason": node.status_reason,
                }
            )
    reasons = {
        ev.payload.get("iteration"): str(ev.payload.get("reason", ""))
        for ev in store.events(run_id=run_id, kind="diagnosis.no_patch")
    }
    for it in store.iterations(run_id):
        if it.decision == "no_patch":
            out.append(
                {
                    "iteration": it.number,
                    "node": None,
                    "origin": "",
                    "patch_kind": "",
                    "hypothesis": "",
                    "status": "no_patch",
                    "reason": reasons.get(it.number) or "diagnosis produced no patch",
                }
            )
    return sorted(out, key=lambda f: (f["iteration"], f["node"] is None, f["node"] or 0))


def _rate_table(nodes: list[Node], key: Any) -> dict[str, dict[str, Any]]:
    total = len(nodes)
    counts: Counter[str] = Counter(key(n) for n in nodes)
    accepted: Counter[str] = Counter(key(n) for n in nodes if n.status == "accepted")
    return {
        name: {
            "patches": c,
            "share": _r(c / total),
            "accepted": accepted[name],
            "acceptance_rate": _r(accepted[name] / c),
        }
        for name, c in sorted(counts.items())
    }


def _patch_stats(candidates: list[Node]) -> dict[str, Any]:
    decided = [n for n in candidates if n.status != "pending"]
    patches = [n for n in decided if n.patch_kind in DIAGNOSIS_KINDS]
    return {
        "patches": len(patches),
        "by_kind": _rate_table(patches, lambda n: n.patch_kind),
        "by_subtype": _rate_table(patches, lambda n: (n.hypothesis or {}).get("subtype") or "unspecified"),
        "evolution": dict(sorted(Counter(n.patch_kind for n in decided if n.patch_kind in EVOLUTION_KINDS).items())),
    }


def _cost(store: EvoDAG, run_id: int, wall: float | None) -> dict[str, Any]:
    rows = store.rollouts(run_id)
    by_split = Counter(r.split for r in rows)
    traces: list[str] = []
    for ev in store.events(run_id=run_id, kind="diagnosis.evidence"):
        traces.extend(str(p) for p in ev.payload.get("trace_paths", []))
    sessions = store.sessions(run_id)
    by_role: dict[str, dict[str, Any]] = {}
    for s in sessions:
        role = by_role.setdefault(s.role, {"count": 0, "turns": 0, "cost_usd": 0.0})
        role["count"] += 1
        role["turns"] += s.turns
        role["cost_usd"] = _r(role["cost_usd"] + s.cost_usd)
    return {
        "rollouts": {
            "total": store.count_rollouts(run_id),
            "by_split": {split: by_split.get(split, 0) for split in ("train", "dev", "test")},
            "cost_usd": _r(store.rollout_cost(run_id)),
            "infra_errors": sum(1 for r in rows if r.disposition == "infra_error"),
        },
        "traces_used": {"total": len(traces), "distinct": len(set(traces))},
        "sessions": {
            "count": len(sessions),
            "turns": sum(s.turns for s in sessions),
            "cli_attempts": sum(s.cli_attempts or 1 for s in sessions),  # retries of transient API errors included
            "tokens_in": sum(s.tokens_in for s in sessions),
            "tokens_out": sum(s.tokens_out for s in sessions),
            "cost_usd": _r(sum(s.cost_usd for s in sessions)),
            "by_role": dict(sorted(by_role.items())),
        },
        "wall_time_s": wall,
    }


def _wall_time(started: str, finished: str | None) -> float | None:
    if not finished:
        return None
    try:
        return _r((datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds())
    except ValueError:
        return None


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else _r(b - a)


def build_report(store: EvoDAG, run_id: int | None = None) -> dict[str, Any]:
    """All end-of-run figures of the run (latest when `run_id` is None) as a JSON-serialisable dict."""
    run = store.get_run(run_id)
    all_nodes = store.nodes(run.id)
    nodes = {n.id: n for n in all_nodes}
    base_id = run.baseline_node_id
    if base_id is None:
        base_id = next((n.id for n in all_nodes if n.status == "baseline"), None)
    best_id = run.best_node_id or base_id  # the loop's record of its ranking policy's pick
    base, best = nodes.get(base_id or -1), nodes.get(best_id or -1)
    chain = store.lineage(best.id) if best else []
    search = [n for n in all_nodes if n.origin != MINIMIZE_ORIGIN]  # the minimization's nodes have their section
    candidates = sorted((n for n in search if n.status != "baseline"), key=lambda n: (n.iteration, n.id))
    statuses = Counter(n.status for n in candidates)
    iterations = store.iterations(run.id)
    kind = scoring.recorded_score_kind(run.config, run.inputs)
    base_rows = store.rollouts(run.id, node_id=base.id, split="test") if base else []
    best_rows = store.rollouts(run.id, node_id=best.id, split="test") if best else []
    test_base, test_best = (scoring.node_score(rows, kind).figures() for rows in (base_rows, best_rows))
    delta_ci = scoring.paired_bootstrap_ci(base_rows, best_rows, kind, seed=run.seed)
    dev_base = {"mean": _r(base.dev_mean), "std": _r(base.dev_std)} if base else {"mean": None, "std": None}
    dev_best = {"mean": _r(best.dev_mean), "std": _r(best.dev_std)} if best else {"mean": None, "std": None}
    wall = _wall_time(run.started_at, run.finished_at)
    scales = (run_metric(store, run.id), run_metric(store, run.id, batch=True))
    return {
        "run": {
            "id": run.id,
            "name": run.config.get("name", "run"),
            "benchmark": run.config.get("benchmark", ""),
            "seed": run.seed,
            "status": run.status,
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "termination_reason": run.termination_reason,
            "wall_time_s": wall,
            "test_runs": run.config.get("loop", {}).get("test_runs"),
        },
        "baseline": {"node": base.id, "commit": base.commit} if base else None,
        "best": {"node": best.id, "commit": best.commit, "status": best.status} if best else None,
        "summary": {
            "test": {
                "baseline": test_base,
                "final": test_best,
                "delta": _delta(test_base["mean"], test_best["mean"]),
                "delta_ci95": list(delta_ci) if delta_ci else None,  # paired bootstrap over the test tasks
            },
            "dev": {"baseline": dev_base, "final": dev_best, "delta": _delta(dev_base["mean"], dev_best["mean"])},
            "score": kind,
            "metric": _metric_summary(store, run.id, base, best, (base_rows, best_rows)),
            "scale": metric_keys(store, run.id),  # every score shown as the metric it stands for
            "shown": {  # the baseline's and the best's scores in the metric, from the unrounded means
                split: [
                    score_text(getattr(n, f"{split}_mean"), scales[0]) if n and scales[0] else None
                    for n in (base, best)
                ]
                for split in ("test", "dev")
            },
        },
        "counts": {
            "iterations": len(iterations),
            "candidates": len(candidates),
            "kept": sum(statuses[s] for s in KEPT_DECISIONS),
            "accepted": statuses["accepted"],
            "neutral": statuses["neutral"],
            "discarded": statuses["rejected"],
            "invalid": statuses["invalid"],
            "pending": statuses["pending"],
            "decisions": dict(sorted(Counter(it.decision or "unfinished" for it in iterations).items())),
        },
        "decisions": decisions(iterations),
        "effective_mutations": {
            "lineage": [_mutation(nodes, n, scales) for n in chain[1:]],
            "accepted": [_mutation(nodes, n, scales) for n in candidates if n.status == "accepted"],
        },
        "per_task": _per_task(base_rows, best_rows) if base and best else [],
        "failed_mutations": _failed(store, run.id, candidates),
        "patch_kinds": _patch_stats(candidates),
        "cost": _cost(store, run.id, wall),
        "minimized": minimized_figures(store, run.id, nodes, best.id if best else None),
    }


def write_report(store: EvoDAG, run_dir: Path, run_id: int | None = None, *, plot: bool = True) -> Path:
    """Write `run_dir/report.md` and report.html (and, with `plot`, progress.png); returns report.md's path."""
    from saddler.reporting.html import write_report_html
    from saddler.reporting.markdown import render_report

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    figures = build_report(store, run_id)
    if plot:
        from saddler.reporting.plot import plot_progress

        with atomic_path(run_dir / "progress.png") as tmp:
            plot_progress(store, tmp, figures["run"]["id"])
    path = run_dir / "report.md"
    write_text_atomic(path, render_report(figures))
    write_report_html(store, run_dir, figures["run"]["id"])  # report.html beside it: the dashboard, one file
    return path

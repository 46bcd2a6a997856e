"""The end of a run: the best node by dev, baseline and best on test (k runs, mean ± std of the run's score:
Pass@1 under `pass_rate`, the mean graded score under `mean_score`; plus the benchmark's own metric when it
declares one), the minimized harness and the full one both on test (`saddler.run.minimize`: whichever the
ranking policy made the best, and its counterpart), the best exported, report.md, results.tsv and the progress
plot.

Test is opened here and nowhere else, but for the same tests started beside the minimization, which reads dev only
(`Optimizer._test_ahead`). Re-running a finished run repeats nothing: test rollouts are cached like every other
rollout.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evodag.models import Node
from saddler.errors import disk_full_as
from saddler.minimized import ORIGIN, Minimization, minimization
from saddler.run.context import RunContext
from saddler.run.faults import fault_point
from saddler.scoring import figure, metric_line, metric_mean, node_score, paired_bootstrap_ci


@dataclass
class RunOutcome:
    """What `saddler run` prints at the end, also as grep-able `metric: value` lines."""

    reason: str
    best_node: int
    baseline_test: tuple[float, float] | None
    best_test: tuple[float, float] | None
    best_dev: float | None
    rollouts: int
    report: Path | None
    score: str = "pass_rate"  # the per-task score the run ranked and accepted on
    metric: str | None = None  # "<name> (<direction>)" when the benchmark declares its own metric
    baseline_test_metric: float | None = None
    best_test_metric: float | None = None
    delta_test_ci95: tuple[float, float] | None = None  # paired bootstrap over the test tasks
    infra_errors: int = 0  # rollouts that could not run: their scores count nowhere
    minimized: Minimization | None = None  # the best harness minimized on dev, when it was
    minimized_test: tuple[tuple[float, float], tuple[float, float]] | None = None  # (full, minimized) on test

    def minimized_text(self) -> str:
        """`3 of 9 changes, dev 0.925 -> 0.925, test 0.9000 -> 0.9050, node 23` (full -> minimized; test only
        when the minimized harness is smaller)."""
        assert self.minimized is not None
        text = self.minimized.summary()
        if self.minimized_test is not None:
            full, small = self.minimized_test
            text += f", test {figure(full[0])} -> {figure(small[0])}"
        return f"{text}, node {self.minimized.node}"

    def metric_lines(self) -> list[str]:
        lines = [metric_line("termination", self.reason), metric_line("best_node", self.best_node)]
        lines.append(metric_line("score", self.score))
        if self.best_dev is not None:
            lines.append(metric_line("best_dev", self.best_dev))
        if self.baseline_test and self.best_test:
            lines += [
                metric_line("baseline_test", self.baseline_test[0]),
                metric_line("baseline_test_std", self.baseline_test[1]),
                metric_line("best_test", self.best_test[0]),
                metric_line("best_test_std", self.best_test[1]),
                metric_line("delta_test", self.best_test[0] - self.baseline_test[0]),
            ]
            if self.delta_test_ci95 is not None:
                lo, hi = self.delta_test_ci95
                lines.append(f"delta_test_ci95: {figure(lo, signed=True)} {figure(hi, signed=True)}")
        if self.minimized is not None:
            lines.append(f"minimized: {self.minimized_text()}")
        if self.metric is not None:
            lines.append(f"metric: {self.metric}")
            for label, value in (("baseline", self.baseline_test_metric), ("best", self.best_test_metric)):
                lines.append(f"{label}_test_metric: {'nan' if value is None else f'{value:.6g}'}")
        lines.append(f"rollouts: {self.rollouts}")
        if self.infra_errors:
            share = 100 * self.infra_errors / max(1, self.rollouts)
            lines.append(f"infra_errors: {self.infra_errors} ({share:.1f}% of rollouts, counted nowhere)")
        if self.report:
            lines += [
                f"report: {self.report}",
                f"report_html: {self.report.with_name('report.html')}",
                f"ui: saddler ui {self.report.parent}",
            ]
        return lines


def evaluate_test(ctx: RunContext, node: Node) -> Node:
    """k test runs of `node` (distinct seeds), stored as its test mean ± std (under the run's score kind)."""
    rows = ctx.evaluator.evaluate(node, ctx.tasks["test"], "test", ctx.test_seeds)
    score = node_score(rows, ctx.score_kind)
    return ctx.store.update_node(node.id, test_mean=score.mean, test_std=score.std)


def finish_run(ctx: RunContext, baseline: Node, reason: str, say: Callable[[str], None]) -> RunOutcome:
    """Test-evaluate the baseline and the recorded best node, export the best, write the report and the plot."""
    from saddler.harness.export import export_harness
    from saddler.run.handoff import write_pr_md

    store = ctx.store
    best = ctx.best()
    other = counterpart(ctx, best)
    also = f" and n{other.id} ({'minimized' if other.origin == ORIGIN else 'unminimized'})" if other else ""
    say(
        f"search over ({reason}); best node n{best.id} (dev {figure(best.dev_mean)}); evaluating baseline and "
        f"best{also} on test × {len(ctx.test_seeds)}"
    )
    on_test = [store.get_node(baseline.id)] + ([best] if best.id != baseline.id else [])
    on_test += [other] if other is not None and other.test_mean is None else []
    tested = ctx.together(*(functools.partial(evaluate_test, ctx, n) for n in on_test))  # one submission
    base = tested[0]
    best = base if best.id == base.id else tested[1]
    fault_point("finish", str(ctx.paths.best))
    export_harness(ctx.space, store, best.id, ctx.paths.best)
    write_pr_md(store, ctx.space, ctx.run_id, ctx.paths.best)  # the pull-request description beside it
    store.update_run(ctx.run_id, status="finished", termination_reason=reason, finished_at=store.clock())
    report = write_artifacts(ctx)
    return _outcome(ctx, reason, base, best, report)


def counterpart(ctx: RunContext, node: Node) -> Node | None:
    """The full harness when `node` is a minimized one, the minimized harness when `node` was minimized to a
    smaller one, else None (`Minimization.counterpart`)."""
    small = minimization(ctx.store, ctx.run_id, node.id)
    other = small.counterpart(node.id) if small is not None else None
    return ctx.store.get_node(other) if other is not None else None


def refresh_answer(ctx: RunContext, say: Callable[[str], None]) -> None:
    """After `saddler minimize` on a finished run: the best and its counterpart on test, `best/` and the report."""
    from saddler.harness.export import export_harness

    best = ctx.best()
    for node in (best, counterpart(ctx, best)):
        if node is not None and node.test_mean is None:
            say(f"evaluating n{node.id} on test × {len(ctx.test_seeds)}")
            evaluate_test(ctx, node)
    export_harness(ctx.space, ctx.store, best.id, ctx.paths.best)
    write_artifacts(ctx)


def _outcome(ctx: RunContext, reason: str, base: Node, best: Node, report: Path | None) -> RunOutcome:
    scale = ctx.benchmark.metric
    base_rows, best_rows = (ctx.store.rollouts(ctx.run_id, node_id=n.id, split="test") for n in (base, best))
    metrics: tuple[float | None, float | None] = (None, None)
    if scale is not None:
        metrics = (metric_mean(base_rows, scale), metric_mean(best_rows, scale))

    def test(node: Node) -> tuple[float, float] | None:
        return None if node.test_mean is None else (node.test_mean, node.test_std or 0.0)

    delta_ci = paired_bootstrap_ci(base_rows, best_rows, ctx.score_kind, seed=ctx.cfg.seed)
    small = minimization(ctx.store, ctx.run_id, best.id)
    pair = [ctx.store.get_node(n) for n in (small.best_node, small.node)] if small and small.smaller else []
    tests = [test(n) for n in pair]

    return RunOutcome(
        reason,
        best.id,
        test(base),
        test(best),
        best.dev_mean,
        ctx.store.count_rollouts(ctx.run_id),
        report,
        ctx.score_kind,
        scale.label if scale is not None else None,
        *metrics,
        delta_ci,
        ctx.store.disposition_counts(ctx.run_id).get("infra_error", 0),
        small,
        (tests[0], tests[1]) if len(tests) == 2 and tests[0] and tests[1] else None,
    )


def write_artifacts(ctx: RunContext) -> Path:
    """results.tsv, report.md and progress.png, each replaced whole (a full disk leaves the old file)."""
    from saddler.reporting.figures import write_report
    from saddler.reporting.results_tsv import write_results_tsv

    with disk_full_as("the report", ctx.paths.root):
        write_results_tsv(ctx.store, ctx.paths.root / "results.tsv", run_id=ctx.run_id)
        return write_report(ctx.store, ctx.paths.root, run_id=ctx.run_id)


def finished_outcome(ctx: RunContext) -> RunOutcome:
    """The outcome a finished run ended with, read from the store: re-running a finished run writes nothing
    (no new timestamp, report or event) and prints the same summary. Only an end-of-run file that is missing
    (a full disk stopped it being written) is written again, from the same store."""
    from saddler.harness.export import export_harness
    from saddler.run.handoff import write_pr_md

    run = ctx.store.get_run(ctx.run_id)
    if run.best_node_id is not None and not (ctx.paths.best / "EXPORT.json").is_file():
        export_harness(ctx.space, ctx.store, run.best_node_id, ctx.paths.best)
    if run.best_node_id is not None and not (ctx.paths.best / "PR.md").is_file():
        write_pr_md(ctx.store, ctx.space, ctx.run_id, ctx.paths.best)
    if not all((ctx.paths.root / name).is_file() for name in ("report.md", "results.tsv", "progress.png")):
        write_artifacts(ctx)
    best = ctx.best()  # the same best_node_id as `run` (nothing above records another)
    base = ctx.store.get_node(run.baseline_node_id) if run.baseline_node_id is not None else best
    report = ctx.paths.report if ctx.paths.report.is_file() else None
    return _outcome(ctx, run.termination_reason or "finished", base, best, report)

"""Compare saddler's default with its ablations, the paper's rule and GEPA, offline, per benchmark and proposer.

A cell is one bundled benchmark (`opsdesk`, `repofix`) with one offline proposer (`neutral`: writes the
best-matching bank patch as meant; `calibrated`: writes patches as the AutoSaddler paper measured LLM authors do,
see `saddler.sessions.proposer`). In every cell every strategy runs on the same seeds (same train/dev/test draws)
and is measured the same way (`bench/strategy_runs.py`):

- rollouts spent: the search (train + dev rows the run stored before its end, close-call evidence included),
  test separately;
- test: Pass@1 of the node the strategy *returns* by its own rule, over the run's k test seeds;
- rollouts to 90 % of its own final dev (dev-blind strategies are charged the dev evaluations of their answers);
- ties rejected: the share of rejected candidates whose decision rested on a tie (no task moved either way over
  everything compared); false accepts: the share of accepted candidates whose test is below their parent's;
  within 2 points of the DAG's best: the share of seeds where the returned node's test is within 0.02 of the
  best test of any valid node of its DAG (every node evaluated on test after the run, by the bench only).

Grep-able lines, per cell `<bench>.<proposer>.` and strategy: `strategy_<name>_rollouts_spent`, `_test`,
`_test_std`, `_gain`, `_returned_dev`, `_rollouts_to_90pct_own_dev`, `_ties_rejected_share`,
`_false_accept_share`, `_within_2pts_of_dag_best`, `_within_2pts_of_kept_best` (of the best node the run kept:
the best its own evidence favoured), `_within_2pts_of_dag_best_unminimized` (the full best before the
minimization), `_dag_best_is_kept_share`, `_seeds`, `_evidence_rollouts`, `_minus_full_test` (paired, ± standard
error), and `check_*` lines stating whether the default meets each bar of issue 19, with the figures;
`proposed_check_*` lines are bars the bench proposes instead (GEPA at equal LLM sessions as well as at equal
rollouts: the `_sessions` variants; within 2 points of the best node the run kept, beside the DAG's best), printed
but not counted in `check_all`.

Usage: python bench/strategies.py [--benchmarks opsdesk,repofix] [--proposers neutral,calibrated]
       [--first-seed 0] [--seeds 20] [--iterations 30] [--only full,paper] [--jobs 2] [--out DIR] [--reuse]
       [--record FILE]
       python bench/strategies.py --from FILE [--from FILE ...] [--benchmarks ...] [--proposers ...] [--only ...]
All runs of a benchmark share one rollout cache, so a rollout identical across strategies executes once (it is
still counted as spent by each run that stores it); `--reuse` measures the finished runs of an earlier `--out`
and resumes its interrupted ones. A sweep too long for one sitting runs in shards of seeds: `--record` appends
each run's figures to a JSON-lines file as it finishes, and `--from` reports several such files as one sweep,
refusing records of other code (see `bench/strategy_records.py`).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import strategy_records
from strategy_runs import SeedResult, run_one, session_counts

STRATEGIES: dict[str, dict[str, Any]] = {
    "full": {},  # the default
    # AutoSaddler as published: strict-mean acceptance, the fixed phase schedule, the epoch sampler
    "paper": {
        "policies": {"acceptance": "strict_mean", "phase_moves": "fixed", "sampler": "epoch", "dev_guard": False}
    },
    "no_dev_guard": {"policies": {"dev_guard": False}},
    "unsure_dev_guard": {"policies": {"dev_guard_unsure": 0.5}},  # dev decides train's unsure accepts too
    "strict_mean": {"policies": {"acceptance": "strict_mean"}},  # no close-call evidence
    "fixed_phases": {"policies": {"phase_moves": "fixed"}},  # no phase moves on evidence
    "epoch_sampler": {"policies": {"sampler": "epoch"}},
    "phases_off": {"policies": {"phases": "none"}},
    "late_capability": {"policies": {"steering_allows_capability": True}},
    "full_coverage": {"policies": {"phase_transition": "full_coverage"}},
    "partial_credit": {"policies": {"score": "mean_score"}},
    # Meta-Harness style: every candidate on the whole train split and on dev, no phase schedule
    "full_batch": {"policies": {"sampler": "full", "dev_eval": "always", "phases": "none"}},
    "dev_never": {"policies": {"dev_eval": "never", "evolution": "continue"}},
    "greedy": {"policies": {"dev_eval": "never", "evolution": "continue", "phases": "none"}},
}
KNOBS: dict[str, str] = {  # a default chosen by issue 19 -> the strategy that differs from `full` only there
    "policies.acceptance = sequential": "strict_mean",
    "policies.phase_moves = evidence": "fixed_phases",
    "policies.sampler = curriculum": "epoch_sampler",
    "policies.dev_guard = true": "no_dev_guard",
}
# real GEPA driven by the same proposer, without and with saddler's phases, at the default's rollouts (and, the
# `_sessions` pair, at the default's LLM sessions too: see bench/gepa_strategy.py)
GEPA = ("gepa", "gepa_phases", "gepa_sessions", "gepa_phases_sessions")
BENCHMARKS = ("opsdesk", "repofix")
PROPOSERS = ("neutral", "calibrated")
Say = Callable[[str], None]


def overrides_of(name: str, proposer: str) -> dict[str, Any]:
    """The `[run]` settings strategy `name` runs with under the offline `proposer` (GEPA's: the proposer only)."""
    return {**STRATEGIES.get(name, {}), "sessions": {"proposer": proposer}}


def _mean(xs: list[float]) -> float:
    return statistics.mean(xs) if xs else 0.0


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def posthoc_caveat(name: str) -> str:
    """What to add to a figure built on the bench's post-hoc test of every node, for strategy `name`: those tests
    are scored in the run's own score kind (`evaluate_nodes`), so a strategy that scores by another kind than the
    benchmarks' Pass@1 has them on another scale than its returned test (nothing to add for the others)."""
    kind = STRATEGIES.get(name, {}).get("policies", {}).get("score", "pass_rate")
    if kind == "pass_rate":
        return ""
    return f"  (post-hoc node tests scored as {kind}, its returned test as Pass@1: not comparable with the others)"


def report(cell: str, name: str, runs: list[SeedResult], say: Say) -> None:
    """The strategy's figures in one cell, as grep-able lines."""
    caveat = posthoc_caveat(name)
    tests = [r.test for r in runs]
    std = statistics.pstdev(tests) if len(tests) > 1 else 0.0
    reached = [r.reach for r in runs if r.reach is not None]
    median = statistics.median(reached) if reached else float("nan")
    p = f"{cell}.strategy_{name}"
    say(f"{p}_seeds: {len(runs)}")
    say(f"{p}_rollouts_spent: {_mean([r.spent for r in runs]):.1f}")
    say(f"{p}_evidence_rollouts: {_mean([r.evidence_rollouts for r in runs]):.1f}")
    paid = [r for r in runs if r.sessions is not None]
    say(f"{p}_llm_sessions: {_mean([r.sessions or 0 for r in paid]):.1f}  (proposals: "
        f"{_mean([r.proposals or 0 for r in paid]):.1f}; with an LLM backend each is paid in tokens)")  # fmt: skip
    say(f"{p}_test_rollouts: {_mean([r.test_spent for r in runs]):.1f}")
    say(f"{p}_test: {_mean(tests):.4f}")
    say(f"{p}_test_std: {std:.4f}")
    say(f"{p}_gain: {_mean([r.test - r.baseline_test for r in runs]):.4f}")
    say(f"{p}_returned_dev: {_mean([r.returned_dev for r in runs]):.4f}")
    say(f"{p}_rollouts_to_90pct_own_dev: {median:.0f}  (median over the seeds that reach it)")
    say(f"{p}_never_90pct_own_dev: {len(runs) - len(reached)}  (seeds whose answer never reaches it)")
    rejected, accepted = sum(r.rejected for r in runs), sum(r.accepted for r in runs)
    say(f"{p}_ties_rejected_share: {_share(sum(r.ties_rejected for r in runs), rejected):.3f}  (of {rejected} "
        "rejections: decided by a tie of the batch alone)")  # fmt: skip
    say(f"{p}_ties_after_evidence_share: {_share(sum(r.ties_after_evidence for r in runs), rejected):.3f}  "
        "(a tie the gathered evidence did not break: no task moved)")  # fmt: skip
    say(f"{p}_good_patches_rejected_share: {_share(sum(r.good_rejected for r in runs), rejected):.3f}  "
        "(rejected patches of the bank's best combination)")  # fmt: skip
    say(f"{p}_false_accept_share: {_share(sum(r.false_accepts for r in runs), accepted):.3f}  (of {accepted})"
        + caveat)  # fmt: skip
    say(f"{p}_within_2pts_of_dag_best: {_share(sum(r.within_2pts for r in runs), len(runs)):.3f}" + caveat)
    say(f"{p}_within_2pts_of_kept_best: {_share(sum(r.within_2pts_of_kept for r in runs), len(runs)):.3f}" + caveat)
    full_near = _share(sum(r.within_2pts_unminimized for r in runs), len(runs))
    say(f"{p}_within_2pts_of_dag_best_unminimized: {full_near:.3f}  (the full best, before the minimization)"
        + caveat)  # fmt: skip
    kept = [r.dag_best_kept for r in runs if r.dag_best_kept is not None]
    say(f"{p}_dag_best_is_kept_share: {_share(sum(kept), len(kept)):.3f}  (of {len(kept)} seeds: the DAG's best on "
        "test is a node the run's evidence kept, not a rejected one)" + caveat)  # fmt: skip
    say(f"{p}_saturated_batches: {_mean([r.saturated for r in runs]):.2f}")
    say(f"{p}_blocked_iterations: {_mean([r.blocked for r in runs]):.2f}")
    say(f"{p}_capability_in_returned: {_mean([r.capability_in_returned for r in runs]):.2f}  (capability patches in "
        "the returned node's lineage)")  # fmt: skip


def paired_stats(runs: list[SeedResult], base: list[SeedResult]) -> tuple[float, float, int, int, int] | None:
    """(mean, standard error, better, worse, seeds) of `runs` minus `base` on test, seed by seed; None under two."""
    by_seed = {r.seed: r.test for r in base}
    diffs = [r.test - by_seed[r.seed] for r in runs if r.seed in by_seed]
    if len(diffs) < 2:
        return None
    se = statistics.stdev(diffs) / len(diffs) ** 0.5
    return statistics.mean(diffs), se, sum(d > 1e-9 for d in diffs), sum(d < -1e-9 for d in diffs), len(diffs)


def checks(cell: str, results: dict[str, list[SeedResult]], say: Say) -> list[bool]:
    """Issue 19's bars for the default in one cell, each a `check_` line; the list of pass/fail."""
    full = results.get("full")
    if not full:
        return []
    out: list[bool] = []

    def check(name: str, ok: bool, detail: str) -> None:
        out.append(ok)
        say(f"{cell}.check_{name}: {'pass' if ok else 'FAIL'}  ({detail})")

    def proposed(name: str, ok: bool, detail: str) -> None:  # a bar the bench proposes: printed, not counted
        say(f"{cell}.proposed_check_{name}: {'pass' if ok else 'FAIL'}  ({detail}; proposed, not issue 19's bar)")

    full_spent = _mean([r.spent for r in full])
    for name, runs in results.items():
        stats = None if name == "full" else paired_stats(runs, full)
        if stats is None:
            continue
        mean, se, up, down, n = stats
        say(f"{cell}.strategy_{name}_minus_full_test: {mean:+.4f}  (± {se:.4f} s.e., {n} seeds: better {up}, "
            f"worse {down})")  # fmt: skip
        not_above = mean <= 1e-9 or mean < se  # every variant's bar: higher by less than one paired s.e.
        if name == "full_batch" and not_above:
            check(name, True, f"{mean:+.4f} ± {se:.4f}: not above the default by one s.e., whatever it spends")
        elif name == "full_batch":  # above: allowed 2 points while the default spends at most 40 % of its rollouts
            spent = _mean([r.spent for r in runs])
            ok = mean <= 0.02 + 1e-9 and full_spent <= 0.4 * spent
            share = _share(full_spent, spent)
            check(name, ok, f"{mean:+.4f} (≤ +0.02 allowed), the default spends {share:.0%} of its rollouts")
        elif name == "gepa":
            check(name, mean <= -0.05 + 1e-9, f"default {-mean:+.4f} above GEPA (≥ +0.05 asked)")
        elif name == "gepa_phases":
            check(name, mean <= 1e-9, f"default {-mean:+.4f} against GEPA with saddler's phases (≥ 0 asked)")
        elif name == "gepa_sessions":
            proposed(name, mean <= -0.05 + 1e-9, f"default {-mean:+.4f} above GEPA at equal LLM sessions (≥ +0.05)")
        elif name == "gepa_phases_sessions":
            detail = f"default {-mean:+.4f} against GEPA with saddler's phases at equal LLM sessions (≥ 0)"
            proposed(name, mean <= 1e-9, detail)
        else:
            check(name, not_above, f"{mean:+.4f} ± {se:.4f}: higher by less than one s.e. is allowed")
    rejected, accepted = sum(r.rejected for r in full), sum(r.accepted for r in full)
    ties = _share(sum(r.ties_rejected for r in full), rejected)
    check("ties_rejected_share", ties <= 0.25, f"{ties:.3f} ≤ 0.25")
    false = _share(sum(r.false_accepts for r in full), accepted)
    check("false_accept_share", false <= 0.08, f"{false:.3f} ≤ 0.08")
    near = _share(sum(r.within_2pts for r in full), len(full))
    check("within_2pts_of_dag_best", near >= 0.9, f"{near:.3f} ≥ 0.90")
    kept = _share(sum(r.within_2pts_of_kept for r in full), len(full))
    detail = f"{kept:.3f} ≥ 0.90: of the best node the run kept, the best its train or dev evidence could prefer"
    proposed("within_2pts_of_kept_best", kept >= 0.9, detail)
    return out


def defaults_found(results: dict[str, dict[str, list[SeedResult]]], say: Say) -> None:
    """For each default issue 19 set, whether the bench shows it better than the alternative in every cell."""
    for knob, alternative in KNOBS.items():
        cells = []
        for cell, by_name in results.items():
            stats = paired_stats(by_name.get("full", []), by_name.get(alternative, []))
            if stats is not None:
                cells.append((cell, stats[0], stats[1]))
        if not cells:
            continue
        ahead = sum(1 for _, mean, _ in cells if mean > 1e-9)
        figures = ", ".join(f"{cell} {mean:+.3f} ± {se:.3f}" for cell, mean, se in cells)
        say(f"finding_default {knob}: ahead of `{alternative}` in {ahead} of {len(cells)} cell(s) ({figures})")


def _job(args: tuple[Any, ...]) -> tuple[str, str, int, SeedResult]:
    cell, name, template, overrides, seed, iterations, run_dir, cache, reuse, budget, sessions = args
    if name in GEPA:
        import gepa_strategy  # needs the optional `bench` extra

        sets = {"sessions": overrides["sessions"]}
        outcome = gepa_strategy.bench_seed(
            name, seed, budget, run_dir.parent, cache, reuse, template=template, overrides=sets, sessions=sessions
        )
        fields = outcome.seed_fields() | session_counts(run_dir)  # bench_seed ran it in run_dir
        return cell, name, seed, SeedResult(**fields)
    return cell, name, seed, run_one(template, overrides, seed, iterations, run_dir, cache, reuse)


def _gepa_installed() -> bool:
    import gepa_strategy

    return gepa_strategy.installed()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    parser.add_argument("--proposers", default=",".join(PROPOSERS))
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--only", default="", help="comma-separated strategy names (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="runs side by side")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--reuse", action="store_true", help="measure the finished runs already in --out again")
    parser.add_argument("--record", type=Path, default=None, help="append each run's figures to this JSON-lines file")
    parser.add_argument("--from", dest="sources", type=Path, action="append", default=[],
                        help="report the records of this file (repeatable: shards) instead of running")  # fmt: skip
    args = parser.parse_args()
    everything = [*STRATEGIES, *(GEPA if args.sources or _gepa_installed() else ())]  # reading records needs no GEPA
    names = [n for n in args.only.split(",") if n] or everything
    unknown = [n for n in names if n not in STRATEGIES and n not in GEPA]
    if unknown:
        parser.error(f"unknown strategy {', '.join(unknown)}; choose from {', '.join([*STRATEGIES, *GEPA])}")
    cells = [(b, p) for b in args.benchmarks.split(",") if b for p in args.proposers.split(",") if p]
    say: Say = lambda line: print(line, flush=True)  # noqa: E731
    started = time.monotonic()
    if args.sources:
        try:
            results = from_records(args.sources, [f"{b}.{p}" for b, p in cells], names, args.iterations)
        except strategy_records.RecordsError as exc:
            parser.exit(2, f"strategies: {exc}\n")
        report_all(results, say)
        return
    if any(n in GEPA for n in names) and "full" not in names:
        parser.error("GEPA's budget is the default's search rollouts: include `full` with a gepa strategy")
    if any(n in GEPA for n in names) and not _gepa_installed():
        parser.error("the gepa strategies need the bench extra: pip install 'saddler[bench]'")
    out = args.out or Path(tempfile.mkdtemp(prefix="saddler-strategies-"))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results = sweep(args, names, cells, seeds, out, say)
    report_all(results, say)
    print(f"# {len(names)} strategies x {len(seeds)} seeds x {len(cells)} cells in {time.monotonic() - started:.0f} s; "
          f"runs in {out}" + (f"; records in {args.record}" if args.record else ""))  # fmt: skip


Results = dict[str, dict[str, list[SeedResult]]]


def sweep(args: argparse.Namespace, names: list[str], cells: list[tuple[str, str]], seeds: range, out: Path,
          say: Say) -> Results:  # fmt: skip
    """Run (or, with `--reuse`, measure) every strategy of `names` on every seed of every cell; each result is
    appended to `args.record` as soon as it is known."""
    results: Results = {}
    print_ = strategy_records.fingerprint() if args.record else ""

    def jobs(wanted: list[str]) -> list[tuple[Any, ...]]:
        todo = []
        for bench, proposer in cells:
            cell = f"{bench}.{proposer}"
            full = {r.seed: (r.spent, r.sessions or 0) for r in results.get(cell, {}).get("full", [])}  # GEPA's budgets
            for name in wanted:
                overrides = overrides_of(name, proposer)
                for seed in seeds:
                    run_dir = out / bench / proposer / f"{name}-s{seed}"
                    cache = out / bench / "shared-cache.sqlite"
                    todo.append((cell, name, bench, overrides, seed, args.iterations, run_dir, cache, args.reuse,
                                 *full.get(seed, (0, 0))))  # fmt: skip
        return todo

    context = multiprocessing.get_context("spawn")
    for wave in ([n for n in names if n not in GEPA], [n for n in names if n in GEPA]):
        if not wave:
            continue
        for bench, _ in cells:
            (out / bench).mkdir(parents=True, exist_ok=True)
        with cf.ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=context) as pool:
            for cell, name, seed, r in pool.map(_job, jobs(wave)):
                results.setdefault(cell, {}).setdefault(name, []).append(r)
                if args.record:
                    overrides = overrides_of(name, cell.split(".")[1])
                    record = strategy_records.Record(print_, cell, name, overrides, args.iterations, r)
                    strategy_records.append(args.record, record)
                say(f"# {cell} {name} seed {seed}: test {r.test:.3f} search {r.spent} (evidence {r.evidence_rollouts}) "
                    f"returned dev {r.returned_dev:.3f} dag best {r.dag_best_test:.3f} ({r.wall_s:.1f} s)")  # fmt: skip
    return results


def from_records(sources: list[Path], cells: list[str], names: list[str], iterations: int) -> Results:
    """The results of the recorded runs of `cells` and `names`, in that order as a live sweep reports them (shards
    combined; see `strategy_records`)."""
    records = [r for r in strategy_records.load(sources) if r.cell in cells and r.strategy in names]
    if not records:
        raise strategy_records.RecordsError("no record of the cells and strategies asked for in those files")
    strategy_records.check_combinable(records, STRATEGIES, iterations)
    results: Results = {}
    for record in sorted(records, key=lambda r: (cells.index(r.cell), names.index(r.strategy), r.result.seed)):
        results.setdefault(record.cell, {}).setdefault(record.strategy, []).append(record.result)
    return results


def report_all(results: Results, say: Say) -> None:
    """Every strategy's figures and the default's bars, per cell, then the findings and the overall verdict."""
    verdicts: list[bool] = []
    for cell, by_name in results.items():
        seeds = sorted({r.seed for runs in by_name.values() for r in runs})
        say(f"# cell {cell}: {len(seeds)} seed(s) {_spans(seeds)}")
        for name, runs in by_name.items():
            report(cell, name, sorted(runs, key=lambda r: r.seed), say)
        verdicts += checks(cell, by_name, say)
    defaults_found(results, say)
    say(f"check_all: {'pass' if verdicts and all(verdicts) else 'FAIL'}  ({sum(verdicts)} of {len(verdicts)} bars met)")


def _spans(seeds: list[int]) -> str:
    """`0-9, 12` for the seeds 0..9 and 12."""
    spans: list[list[int]] = []
    for seed in seeds:
        if spans and seed == spans[-1][1] + 1:
            spans[-1][1] = seed
        else:
            spans.append([seed, seed])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


if __name__ == "__main__":
    main()

"""What `bench/strategies.py` prints of a sweep: each strategy's figures per cell, the default's bars (issue 19's
`check_` lines and the bench's `proposed_check_` ones), the findings on the defaults and the overall verdict."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from strategy_records import spans_of
from strategy_runs import SeedResult
from strategy_table import KNOBS

Say = Callable[[str], None]
Results = dict[str, dict[str, list[SeedResult]]]


def mean_of(xs: list[float]) -> float:
    """The mean of `xs`, 0 for none."""
    return statistics.mean(xs) if xs else 0.0


def share_of(part: float, whole: float) -> float:
    """`part` / `whole`, 0 when `whole` is."""
    return part / whole if whole else 0.0


def spread_of(runs: list[SeedResult]) -> float:
    """The population standard deviation of the runs' test scores across seeds (0 under two)."""
    tests = [r.test for r in runs]
    return statistics.pstdev(tests) if len(tests) > 1 else 0.0


def report(cell: str, name: str, runs: list[SeedResult], say: Say) -> None:
    """The strategy's figures in one cell, as grep-able lines."""
    tests = [r.test for r in runs]
    reached = [r.reach for r in runs if r.reach is not None]
    median = statistics.median(reached) if reached else float("nan")
    p = f"{cell}.strategy_{name}"
    say(f"{p}_seeds: {len(runs)}")
    say(f"{p}_rollouts_spent: {mean_of([r.spent for r in runs]):.1f}")
    say(f"{p}_evidence_rollouts: {mean_of([r.evidence_rollouts for r in runs]):.1f}")
    paid = [r for r in runs if r.sessions is not None]
    say(f"{p}_llm_sessions: {mean_of([r.sessions or 0 for r in paid]):.1f}  (proposals: "
        f"{mean_of([r.proposals or 0 for r in paid]):.1f}; with an LLM backend each is paid in tokens)")  # fmt: skip
    say(f"{p}_test_rollouts: {mean_of([r.test_spent for r in runs]):.1f}")
    say(f"{p}_test: {mean_of(tests):.4f}")
    say(f"{p}_test_std: {spread_of(runs):.4f}")
    say(f"{p}_gain: {mean_of([r.test - r.baseline_test for r in runs]):.4f}")
    say(f"{p}_returned_dev: {mean_of([r.returned_dev for r in runs]):.4f}")
    say(f"{p}_rollouts_to_90pct_own_dev: {median:.0f}  (median over the seeds that reach it)")
    say(f"{p}_never_90pct_own_dev: {len(runs) - len(reached)}  (seeds whose answer never reaches it)")
    rejected, accepted = sum(r.rejected for r in runs), sum(r.accepted for r in runs)
    say(f"{p}_ties_rejected_share: {share_of(sum(r.ties_rejected for r in runs), rejected):.3f}  (of {rejected} "
        "rejections: decided by a tie of the batch alone)")  # fmt: skip
    say(f"{p}_ties_after_evidence_share: {share_of(sum(r.ties_after_evidence for r in runs), rejected):.3f}  "
        "(a tie the gathered evidence did not break: no task moved)")  # fmt: skip
    say(f"{p}_good_patches_rejected_share: {share_of(sum(r.good_rejected for r in runs), rejected):.3f}  "
        "(rejected patches of the bank's best combination)")  # fmt: skip
    say(f"{p}_false_accept_share: {share_of(sum(r.false_accepts for r in runs), accepted):.3f}  (of {accepted})")
    clear = clear_false_accept_share(runs)
    if clear is not None:
        say(f"{p}_false_accept_clear_share: {clear:.3f}  (of {accepted}: clearly lower than the parent on test, "
            "P(better) ≤ 1 − acceptance_confidence)")  # fmt: skip
    say(f"{p}_within_2pts_of_dag_best: {share_of(sum(r.within_2pts for r in runs), len(runs)):.3f}")
    say(f"{p}_within_2pts_of_kept_best: {share_of(sum(r.within_2pts_of_kept for r in runs), len(runs)):.3f}")
    reach = [r.within_2pts_of_dev_reachable for r in runs if r.within_2pts_of_dev_reachable is not None]
    if reach:
        say(f"{p}_within_2pts_of_dev_reachable: {share_of(sum(reach), len(reach)):.3f}  (of {len(reach)} seeds: of "
            "every node the run's own dev rule clearly ranks above the returned one)")  # fmt: skip
    full_near = share_of(sum(r.within_2pts_unminimized for r in runs), len(runs))
    say(f"{p}_within_2pts_of_dag_best_unminimized: {full_near:.3f}  (the full best, before the minimization)")
    kept = [r.dag_best_kept for r in runs if r.dag_best_kept is not None]
    say(f"{p}_dag_best_is_kept_share: {share_of(sum(kept), len(kept)):.3f}  (of {len(kept)} seeds: the DAG's best on "
        "test is a node the run's evidence kept, not a rejected one)")  # fmt: skip
    say(f"{p}_saturated_batches: {mean_of([r.saturated for r in runs]):.2f}")
    say(f"{p}_blocked_iterations: {mean_of([r.blocked for r in runs]):.2f}")
    say(f"{p}_capability_in_returned: {mean_of([r.capability_in_returned for r in runs]):.2f}  (capability patches in "
        "the returned node's lineage)")  # fmt: skip


def clear_false_accept_share(runs: list[SeedResult]) -> float | None:
    """The share of kept candidates clearly lower than their parent on test (None unless every run measured it)."""
    if not runs or any(r.clear_false_accepts is None for r in runs):
        return None
    return share_of(sum(r.clear_false_accepts or 0 for r in runs), sum(r.accepted for r in runs))


def paired_diffs(runs: list[SeedResult], base: list[SeedResult]) -> list[float]:
    """`runs` minus `base` on test, for every seed both hold."""
    by_seed = {r.seed: r.test for r in base}
    return [r.test - by_seed[r.seed] for r in runs if r.seed in by_seed]


def better_worse(diffs: list[float]) -> tuple[int, int]:
    """How many paired differences are above zero and how many below (a float's noise is neither)."""
    return sum(d > 1e-9 for d in diffs), sum(d < -1e-9 for d in diffs)


def paired_stats(runs: list[SeedResult], base: list[SeedResult]) -> tuple[float, float, int, int, int] | None:
    """(mean, standard error, better, worse, seeds) of `runs` minus `base` on test, seed by seed; None under two."""
    diffs = paired_diffs(runs, base)
    if len(diffs) < 2:
        return None
    se = statistics.stdev(diffs) / len(diffs) ** 0.5
    return statistics.mean(diffs), se, *better_worse(diffs), len(diffs)


def checks(cell: str, results: dict[str, list[SeedResult]], say: Say) -> list[bool]:
    """Issue 19's bars for the default in one cell, each a `check_` line; the list of pass/fail."""
    full, bars = results.get("full"), default_bars(results)
    if not full or bars is None:
        return []
    out: list[bool] = []

    def check(name: str, ok: bool, detail: str) -> None:
        out.append(ok)
        say(f"{cell}.check_{name}: {'pass' if ok else 'FAIL'}  ({detail})")

    def proposed(name: str, ok: bool, detail: str) -> None:  # a bar the bench proposes: printed, not counted
        say(f"{cell}.proposed_check_{name}: {'pass' if ok else 'FAIL'}  ({detail}; proposed, not issue 19's bar)")

    full_spent = mean_of([r.spent for r in full])
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
            spent = mean_of([r.spent for r in runs])
            ok = mean <= 0.02 + 1e-9 and full_spent <= 0.4 * spent
            share = share_of(full_spent, spent)
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
            if not not_above:  # above on exactly one seed, the paired mean IS its s.e.: "less than" cannot hold
                one_seed = up == 1 and down == 0
                lone = "above on one seed only, where the paired mean equals its s.e. whatever the size; "
                lone = lone if one_seed else ""
                detail = f"{mean:+.4f} ± {se:.4f}: {lone}at most one s.e. asked"
                proposed(f"{name}_at_most_one_se", mean <= se * (1 + 1e-9), detail)
    check("ties_rejected_share", bars.ties <= 0.25, f"{bars.ties:.3f} ≤ 0.25")
    check("false_accept_share", bars.false_accepts <= 0.08, f"{bars.false_accepts:.3f} ≤ 0.08")
    if bars.clear_false_accepts is not None:
        detail = f"{bars.clear_false_accepts:.3f} ≤ 0.08: kept candidates clearly lower than their parent on test"
        proposed("false_accept_clear_share", bars.clear_false_accepts <= 0.08, detail)
    check("within_2pts_of_dag_best", bars.near >= 0.9, f"{bars.near:.3f} ≥ 0.90")
    detail = f"{bars.kept:.3f} ≥ 0.90: of the best node the run kept, the best its train or dev evidence could prefer"
    proposed("within_2pts_of_kept_best", bars.kept >= 0.9, detail)
    if bars.reachable is not None:
        detail = f"{bars.reachable:.3f} ≥ 0.90: of every node the run's dev rule clearly ranks above the returned one"
        proposed("within_2pts_of_dev_reachable", bars.reachable >= 0.9, detail)
    return out


@dataclass(frozen=True)
class Bars:
    """The default's figures in one cell that issue 19 (or the bench, `kept`) sets a bar on: shares of its
    rejections and accepts, shares of its seeds, the default minus each GEPA strategy (None: not measured), and its
    mean search rollouts."""

    rejected: int
    ties: float
    accepted: int
    false_accepts: float
    clear_false_accepts: float | None  # None: records made before the bench measured it
    near: float
    kept: float
    reachable: float | None  # None: records made before the bench measured it
    over_gepa: float | None
    over_gepa_phases: float | None
    spent: float


def default_bars(by_name: dict[str, list[SeedResult]]) -> Bars | None:
    """The default's `Bars` in one cell (None when the default was not measured there)."""
    full = by_name.get("full")
    if not full:
        return None

    def over(name: str) -> float | None:
        stats = paired_stats(by_name.get(name, []), full)
        return None if stats is None else -stats[0]

    rejected, accepted = sum(r.rejected for r in full), sum(r.accepted for r in full)
    reach = [r.within_2pts_of_dev_reachable for r in full if r.within_2pts_of_dev_reachable is not None]
    return Bars(
        rejected=rejected,
        ties=share_of(sum(r.ties_rejected for r in full), rejected),
        accepted=accepted,
        false_accepts=share_of(sum(r.false_accepts for r in full), accepted),
        clear_false_accepts=clear_false_accept_share(full),
        near=share_of(sum(r.within_2pts for r in full), len(full)),
        kept=share_of(sum(r.within_2pts_of_kept for r in full), len(full)),
        reachable=share_of(sum(reach), len(reach)) if reach else None,
        over_gepa=over("gepa"),
        over_gepa_phases=over("gepa_phases"),
        spent=mean_of([r.spent for r in full]),
    )


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


def cell_seeds(by_name: dict[str, list[SeedResult]]) -> list[int]:
    """The seeds any strategy of one cell was measured on, in order."""
    return sorted({r.seed for runs in by_name.values() for r in runs})


def unmeasured(results: Results, cells: list[str], names: list[str], seeds: range) -> list[str]:
    """The (cell, strategy) pairs of `cells` x `names` that lack any of `seeds` (the seeds asked, as `--todo` reads
    them; seeds beyond them do not count), as "<cell> <name>: N of M seeds"."""
    out = []
    for cell in cells:
        for name in names:
            have = {r.seed for r in results.get(cell, {}).get(name, [])}
            measured = sum(1 for seed in seeds if seed in have)
            if measured < len(seeds):
                out.append(f"{cell} {name}: {measured} of {len(seeds)} seeds")
    return out


def report_all(results: Results, say: Say, asked: tuple[list[str], list[str], range] | None = None) -> None:
    """Every strategy's figures and the default's bars, per cell, then the findings and the overall verdict.
    `asked` (cells, strategies, seeds) is the sweep the verdict is for: while any of it lacks a seed asked,
    `check_all` fails."""
    verdicts: list[bool] = []
    for cell, by_name in results.items():
        seeds = cell_seeds(by_name)
        say(f"# cell {cell}: {len(seeds)} seed(s) {spans_of(seeds)}")
        for name, runs in by_name.items():
            report(cell, name, sorted(runs, key=lambda r: r.seed), say)
        verdicts += checks(cell, by_name, say)
    defaults_found(results, say)
    missing = unmeasured(results, *asked) if asked else []
    if asked and missing:
        pairs, which, span = len(asked[0]) * len(asked[1]), ", ".join(missing), spans_of(list(asked[2]))
        say(f"unmeasured: {len(missing)} of {pairs} strategy-cells asked lack seeds {span} asked ({which}; "
            "--todo prints the commands)")  # fmt: skip
    ok = bool(verdicts) and all(verdicts) and not missing
    tail = "; the sweep asked is not complete" if missing else ""
    say(f"check_all: {'pass' if ok else 'FAIL'}  ({sum(verdicts)} of {len(verdicts)} bars met{tail})")

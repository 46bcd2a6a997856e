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
the best its own evidence favoured), `_within_2pts_of_dev_reachable` (of every node the run's own dev rule
clearly ranks above the returned one: each node more than 2 points above it on test is evaluated on dev after the
run, see `bench/strategy_runs.py`), `_within_2pts_of_dag_best_unminimized` (the full best before the
minimization), `_dag_best_is_kept_share`, `_seeds`, `_evidence_rollouts`, `_minus_full_test` (paired, ± standard
error), and `check_*` lines stating whether the default meets each bar of issue 19, with the figures;
`proposed_check_*` lines are bars the bench proposes instead (GEPA at equal LLM sessions as well as at equal
rollouts: the `_sessions` variants; within 2 points of the best node the run kept, and of every node its dev rule
clearly prefers, beside the DAG's best), printed
but not counted in `check_all`. Reporting records (`--from`), `check_all` also fails while the sweep asked (the
`--first-seed`/`--seeds` span, 20 seeds by default, as `--todo` reads it) lacks seeds: an `unmeasured:` line names
each strategy-cell short of them. Seeds recorded beyond the span are reported too but ask for nothing.

Usage: python bench/strategies.py [--benchmarks opsdesk,repofix] [--proposers neutral,calibrated]
       [--first-seed 0] [--seeds 20] [--iterations 30] [--only full,paper] [--jobs 2] [--out DIR] [--reuse]
       [--record FILE] [--markdown] [--isolated]
       python bench/strategies.py --from FILE [--from FILE ...] [--benchmarks ...] [--proposers ...] [--only ...]
       [--markdown]
Rollouts run in the bench's own process (`bench/inprocess.py`: the offline proposer writes only bank patches, so
nothing untrusted runs; a rollout gives the same result as in saddler's isolated children for about a fifth of the
CPU); `--isolated` runs them as saddler does. All runs of a benchmark share one rollout cache, so a rollout
identical across strategies executes once (it is still counted as spent by each run that stores it); `--reuse`
measures the finished runs of an earlier `--out` and resumes its interrupted ones. A sweep too long for one sitting
runs in shards of seeds: `--record` appends each run's figures to a JSON-lines file as it finishes, and `--from`
reports several such files as one sweep, refusing records of other code (see `bench/strategy_records.py`).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import strategy_markdown
import strategy_records
from strategy_report import Results, Say, report_all
from strategy_runs import SeedResult, run_one, session_counts
from strategy_table import BENCHMARKS, GEPA, PROPOSERS, STRATEGIES, overrides_of

from saddler.procs import die_with_parent  # a worker ends with its sweep, however that ends


def _job(args: tuple[Any, ...]) -> tuple[str, str, int, SeedResult]:
    cell, name, template, overrides, seed, iterations, run_dir, cache, reuse, budget, sessions, isolated = args
    if not isolated:
        import inprocess

        inprocess.install()
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
    isolated = "rollouts in isolated children, as saddler runs them (default: in the bench's process, see inprocess.py)"
    parser.add_argument("--isolated", action="store_true", help=isolated)
    parser.add_argument("--reuse", action="store_true", help="measure the finished runs already in --out again")
    parser.add_argument("--record", type=Path, default=None, help="append each run's figures to this JSON-lines file")
    parser.add_argument("--from", dest="sources", type=Path, action="append", default=[],
                        help="report the records of this file (repeatable: shards) instead of running")  # fmt: skip
    todo = "with --from: the runs the records lack of the seeds asked, and the shard commands that record them"
    parser.add_argument("--todo", action="store_true", help=todo)
    parser.add_argument("--markdown", action="store_true", help="print the docs' tables instead of the grep-able lines")
    args = parser.parse_args()
    everything = [*STRATEGIES, *(GEPA if args.sources or _gepa_installed() else ())]  # reading records needs no GEPA
    names = [n for n in args.only.split(",") if n] or everything
    unknown = [n for n in names if n not in STRATEGIES and n not in GEPA]
    if unknown:
        parser.error(f"unknown strategy {', '.join(unknown)}; choose from {', '.join([*STRATEGIES, *GEPA])}")
    cells = [(b, p) for b in args.benchmarks.split(",") if b for p in args.proposers.split(",") if p]
    say: Say = lambda line: print(line, flush=True)  # noqa: E731
    started = time.monotonic()
    if args.todo and not args.sources:
        parser.error("--todo reads records: give the records file with --from")
    if args.todo:
        try:
            records = [r for r in strategy_records.load(args.sources) if r.strategy in names]
            strategy_records.check_combinable(records, STRATEGIES, args.iterations)
        except strategy_records.RecordsError as exc:
            parser.exit(2, f"strategies: {exc}\n")
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        for line in strategy_records.todo_lines(records, [f"{b}.{p}" for b, p in cells], names, seeds, args.sources[0]):
            say(line)
        return
    if args.sources:
        try:
            asked = [f"{b}.{p}" for b, p in cells]
            results = from_records(args.sources, asked, names, args.iterations)
        except strategy_records.RecordsError as exc:
            parser.exit(2, f"strategies: {exc}\n")
        if args.markdown:
            print_tables(results, say)
        else:
            report_all(results, say, asked=(asked, names, range(args.first_seed, args.first_seed + args.seeds)))
        return
    if any(n in GEPA for n in names) and "full" not in names:
        parser.error("GEPA's budget is the default's search rollouts: include `full` with a gepa strategy")
    if any(n in GEPA for n in names) and not _gepa_installed():
        parser.error("the gepa strategies need the bench extra: pip install 'saddler[bench]'")
    out = args.out or Path(tempfile.mkdtemp(prefix="saddler-strategies-"))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results = sweep(args, names, cells, seeds, out, say)
    (print_tables if args.markdown else report_all)(results, say)
    print(f"# {len(names)} strategies x {len(seeds)} seeds x {len(cells)} cells in {time.monotonic() - started:.0f} s; "
          f"runs in {out}" + (f"; records in {args.record}" if args.record else ""))  # fmt: skip


def print_tables(results: Results, say: Say) -> None:
    """`--markdown`: the docs' tables of `results` (`strategy_markdown`)."""
    for line in strategy_markdown.markdown(results):
        say(line)


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
                                 *full.get(seed, (0, 0)), args.isolated))  # fmt: skip
        return todo

    context = multiprocessing.get_context("spawn")
    for wave in ([n for n in names if n not in GEPA], [n for n in names if n in GEPA]):
        if not wave:
            continue
        for bench, _ in cells:
            (out / bench).mkdir(parents=True, exist_ok=True)
        with cf.ProcessPoolExecutor(
            max_workers=max(1, args.jobs), mp_context=context, initializer=die_with_parent
        ) as pool:
            for cell, name, seed, r in pool.map(_job, jobs(wave)):
                results.setdefault(cell, {}).setdefault(name, []).append(r)
                wall = f"{r.wall_s:.1f} s"
                if args.record:
                    overrides = overrides_of(name, cell.split(".")[1])
                    record = strategy_records.Record(print_, cell, name, overrides, args.iterations, r)
                    wall += "" if strategy_records.append(args.record, record) else ", already recorded"
                say(f"# {cell} {name} seed {seed}: test {r.test:.3f} search {r.spent} (evidence {r.evidence_rollouts}) "
                    f"returned dev {r.returned_dev:.3f} dag best {r.dag_best_test:.3f} ({wall})")  # fmt: skip
    return results


def from_records(
    sources: list[Path], cells: list[str], names: list[str], iterations: int, definitions: dict[str, Any] | None = None
) -> Results:
    """The results of the recorded runs of `cells` and `names`, in that order as a live sweep reports them (shards
    combined; see `strategy_records`). Each strategy must have been recorded as `definitions` define it (default:
    as the bench defines it today)."""
    return results_of(strategy_records.load(sources), cells, names, iterations, definitions)


def results_of(
    loaded: list[strategy_records.Record],
    cells: list[str],
    names: list[str],
    iterations: int,
    definitions: dict[str, Any] | None = None,
) -> Results:
    """`from_records` of records already loaded."""
    records = [r for r in loaded if r.cell in cells and r.strategy in names]
    if not records:
        raise strategy_records.RecordsError("no record of the cells and strategies asked for in those files")
    strategy_records.check_combinable(records, STRATEGIES if definitions is None else definitions, iterations)
    results: Results = {}
    for record in sorted(records, key=lambda r: (cells.index(r.cell), names.index(r.strategy), r.result.seed)):
        results.setdefault(record.cell, {}).setdefault(record.strategy, []).append(record.result)
    return results


if __name__ == "__main__":
    main()

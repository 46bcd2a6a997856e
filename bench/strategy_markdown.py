"""The tables `docs/strategies.md` and the README show, written from a sweep's figures (`bench/strategies.py
--markdown`) so that no figure is copied by hand: one table per cell with every strategy, and a summary with a
column per cell (the default's test, then each strategy minus the default, paired, ± its standard error)."""

from __future__ import annotations

from collections.abc import Callable

from strategy_report import (
    Bars,
    Results,
    better_worse,
    cell_seeds,
    default_bars,
    mean_of,
    paired_diffs,
    paired_stats,
    share_of,
    spread_of,
)
from strategy_runs import SeedResult
from strategy_table import GEPA

COLUMNS = (
    "strategy", "test (± std)", "minus full (paired)", "search rollouts (evidence)", "LLM sessions (proposals)",
    "ties rejected on the batch alone", "false accepts", "within 2 pts of the DAG's best", "of the best kept node",
)  # fmt: skip


def _line(cells: list[str]) -> str:
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def _label(name: str) -> str:
    return "full (the default)" if name == "full" else name


def _signed(value: float) -> str:
    return f"{value:+.3f}".replace("-", "−")


def _share(part: int, whole: int) -> str:
    return f"{share_of(part, whole):.3f} of {whole}"


def _partial(runs: list[SeedResult], seeds: int) -> str:
    """ " (N of M seeds)" for a strategy measured on fewer seeds than its cell (a sweep not finished), else ""."""
    return f" ({len(runs)} of {seeds} seeds)" if 0 < len(runs) < seeds else ""


def _minus(runs: list[SeedResult], full: list[SeedResult], counts: bool) -> str:
    stats = paired_stats(runs, full)
    if stats is None:  # under two paired seeds: one difference is still a figure, without a standard error
        diffs = paired_diffs(runs, full)
        if len(diffs) != 1:
            return ""
        up, down = better_worse(diffs)
        return f"{_signed(diffs[0])}, one seed: no s.e." + (f" ({up} better, {down} worse)" if counts else "")
    mean, se, up, down, _ = stats
    return f"{_signed(mean)} ± {se:.3f}" + (f" ({up} better, {down} worse)" if counts else "")


def cell_table(cell: str, by_name: dict[str, list[SeedResult]]) -> list[str]:
    """The markdown table of one cell: a row per strategy, the default first if it was measured."""
    full, seeds = by_name.get("full", []), len(cell_seeds(by_name))
    lines = [_line(list(COLUMNS)), "|" + "---|" * len(COLUMNS)]
    for name, runs in sorted(by_name.items(), key=lambda item: item[0] != "full"):
        spent = f"{round(mean_of([r.spent for r in runs])):,}"
        paid = [r for r in runs if r.sessions is not None]
        calls, proposals = (
            round(mean_of([r.sessions or 0 for r in paid])),
            round(mean_of([r.proposals or 0 for r in paid])),
        )
        sessions = f"{calls} ({proposals})" if paid else ""
        near = sum(r.within_2pts for r in runs) / len(runs)
        kept = sum(r.within_2pts_of_kept for r in runs) / len(runs)
        row = [
            _label(name) + _partial(runs, seeds),
            f"{mean_of([r.test for r in runs]):.3f} ± {spread_of(runs):.3f}",
            "" if name == "full" else _minus(runs, full, True),
        ]
        if name in GEPA:  # no decisions of saddler's kind; its near-best figure is over the candidates it kept
            row += [spent, sessions, "", "", f"{near:.2f} of its pool", ""]
        else:
            rejected, accepted = sum(r.rejected for r in runs), sum(r.accepted for r in runs)
            row += [
                f"{spent} ({round(mean_of([r.evidence_rollouts for r in runs])):,})",
                sessions,
                _share(sum(r.ties_rejected for r in runs), rejected),
                _share(sum(r.false_accepts for r in runs), accepted),
                f"{near:.2f}",
                f"{kept:.2f}",
            ]
        lines.append(_line(row))
    return lines


def summary_table(results: Results) -> list[str]:
    """A column per cell: the default's mean test, then every other strategy minus the default (bold when above; a
    strategy on fewer seeds than its cell says on how many)."""
    cells = list(results)
    names = ["full"] + [n for by_name in results.values() for n in by_name if n != "full"]
    names = list(dict.fromkeys(names))
    lines = [_line(["strategy", *(c.replace(".", ", ") for c in cells)]), "|" + "---|" * (len(cells) + 1)]
    for name in names:
        row = [_label(name)]
        for cell in cells:
            runs, full = results[cell].get(name, []), results[cell].get("full", [])
            if name == "full":
                row.append(f"{mean_of([r.test for r in runs]):.3f}" if runs else "")
                continue
            stats = paired_stats(runs, full)
            text = _minus(runs, full, False) + _partial(runs, len(cell_seeds(results[cell])))
            row.append(f"**{text}**" if stats is not None and stats[0] > 1e-9 else text)
        lines.append(_line(row))
    return lines


def bars_table(results: Results) -> list[str]:
    """A column per cell: the default's figures that issue 19's other bars (and the bench's proposed one) read, as
    `strategy_report.checks` computes them; "not run" where the cell lacks the default or a GEPA strategy, "(N of M
    seeds)" after a GEPA figure paired on fewer seeds than its cell."""
    cells = list(results)
    bars = [default_bars(results[cell]) for cell in cells]

    def row(label: str, text: Callable[[Bars], str], gepa: str = "") -> str:
        texts = []
        for cell, b in zip(cells, bars, strict=True):
            partial = _partial(results[cell].get(gepa, []), len(cell_seeds(results[cell]))) if gepa else ""
            texts.append("not run" if b is None else text(b) + partial)
        return _line([label, *texts])

    def over(value: float | None) -> str:
        return "not run" if value is None else _signed(value)

    reachable = [  # records made before the bench measured it have no such row
        row(
            "within 2 points of every node dev clearly prefers (proposed, ≥ 0.90)",
            lambda b: "not measured" if b.reachable is None else f"{b.reachable:.2f}",
        )
    ] if any(b is not None and b.reachable is not None for b in bars) else []  # fmt: skip
    clear = [
        row(
            "false accepts clearly lower on test (proposed, ≤ 0.08)",
            lambda b: "not measured" if b.clear_false_accepts is None else f"{b.clear_false_accepts:.3f}",
        )
    ] if any(b is not None and b.clear_false_accepts is not None for b in bars) else []  # fmt: skip
    return [
        _line(["bar", *(c.replace(".", ", ") for c in cells)]),
        "|" + "---|" * (len(cells) + 1),
        row("ties rejected on the batch alone (≤ 0.25)", lambda b: f"{b.ties:.3f} of {b.rejected}"),
        row("false accepts (≤ 0.08)", lambda b: f"{b.false_accepts:.3f} of {b.accepted}"),
        *clear,
        row("within 2 points of the DAG's best (≥ 0.90)", lambda b: f"{b.near:.2f}"),
        row("within 2 points of the best kept node (proposed, ≥ 0.90)", lambda b: f"{b.kept:.2f}"),
        *reachable,
        row("minus GEPA (≥ +0.05)", lambda b: over(b.over_gepa), gepa="gepa"),
        row("minus GEPA with saddler's phases (≥ 0)", lambda b: over(b.over_gepa_phases), gepa="gepa_phases"),
        row("search rollouts", lambda b: f"{round(b.spent):,}"),
    ]


def markdown(results: Results) -> list[str]:
    """Every cell's table under its name, then the summary and the default's other bars."""
    out: list[str] = []
    for cell, by_name in results.items():
        out += [f"*{cell.replace('.', ', ')} ({len(cell_seeds(by_name))} seeds):*", "", *cell_table(cell, by_name), ""]
    out += ["*Summary (minus the default, paired, ± standard error):*", "", *summary_table(results), ""]
    return [*out, "*The default's other bars:*", "", *bars_table(results)]

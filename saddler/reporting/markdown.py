"""Markdown rendering of `saddler.reporting.figures.build_report` figures (the autoresearch report tables).

Sections: Result summary (Baseline / Final / Delta), Effective mutations, Minimized (when the best was),
Per-task (assertion-level) changes, Failed mutations, Patch kinds, Cost, and a closing block of grep-able
`metric: value` lines.
"""

from __future__ import annotations

from typing import Any

from saddler.reporting.minimized_report import minimized_section
from saddler.scoring import metric_line

Row = list[Any]


def _num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _signed(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:+.{digits}f}"


def _score(figure: dict[str, Any]) -> str:
    if figure.get("mean") is None:
        return "—"
    if figure.get("std") is None:
        return _num(figure["mean"])
    return f"{figure['mean']:.3f} ± {figure['std']:.3f}"


def _cell(value: Any) -> str:
    text = "—" if value is None or value == "" else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def table(header: list[str], rows: list[Row]) -> list[str]:
    """A GitHub-markdown table; `|` in cells escaped, newlines collapsed, empty cells shown as —."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


SCORE_LABELS = {"pass_rate": "Pass@1", "mean_score": "mean score"}
SCORE_MEANINGS = {
    "pass_rate": "a task's score is the share of its runs that passed (dev and test are Pass@1)",
    "mean_score": "a task's score is its mean graded score over its runs (partial credit counts)",
}


def _g(x: float | None, sign: str = "") -> str:
    return "—" if x is None else f"{x:{sign}.6g}"


def _delta_ci(test: dict[str, Any]) -> str:
    """The test delta with its 95% paired-bootstrap interval over the test tasks, when there is one."""
    ci = test.get("delta_ci95")
    return _signed(test["delta"]) + (f" (95% CI {ci[0]:+.3f} … {ci[1]:+.3f})" if ci else "")


def _summary(f: dict[str, Any]) -> list[str]:
    test, dev, counts = f["summary"]["test"], f["summary"]["dev"], f["counts"]
    k = test["final"]["runs"] or test["baseline"]["runs"]
    label = SCORE_LABELS.get(f["summary"].get("score", "pass_rate"), "Pass@1")
    metric_shown = f["summary"].get("shown") or {}

    def shown(figure: dict[str, Any], split: str, which: int) -> str:
        text = (metric_shown.get(split) or [None, None])[which]
        return _score(figure) + (f" ({text})" if text else "")

    rows: list[Row] = [
        [f"Test {label} (k={k})", shown(test["baseline"], "test", 0), shown(test["final"], "test", 1), _delta_ci(test)],
        [f"Dev {label}", shown(dev["baseline"], "dev", 0), shown(dev["final"], "dev", 1), _signed(dev["delta"])],
    ]
    metric = f["summary"].get("metric")
    for split in ("test", "dev") if metric else ():
        m = metric[split]
        rows.append(
            [f"{split.title()} {metric.get('label') or metric['name']}", _g(m["baseline"]), _g(m["final"]),
             _g(m["delta"], "+")]
        )  # fmt: skip
    rows += [
        ["Iterations", "—", counts["iterations"], "—"],
        ["Kept", "—", counts["kept"], "—"],
        ["Discarded", "—", counts["discarded"], "—"],
        ["Invalid", "—", counts["invalid"], "—"],
    ]
    return ["## Result summary", "", *table(["Metric", "Baseline", "Final", "Delta"], rows)]


def _mutations(rows: list[dict[str, Any]]) -> list[Row]:
    return [
        [
            m["iteration"],
            m["node"],
            m["status"],
            m["patch_kind"],
            m["subtype"],
            m["origin"],
            m["hypothesis"],
            m["batch_delta_text"],
            m["dev_delta_text"],
        ]
        for m in rows
    ]


MUTATION_HEADER = ["Iteration", "Node", "Status", "Kind", "Subtype", "Origin", "Hypothesis", "Batch Δ", "Dev Δ"]


def _effective(f: dict[str, Any]) -> list[str]:
    eff = f["effective_mutations"]
    best = f["best"]
    out = ["## Effective mutations", ""]
    if best:
        out += [f"Lineage of the best node #{best['node']} (`{best['commit'][:7]}`), baseline first:", ""]
    out += table(MUTATION_HEADER, _mutations(eff["lineage"])) if eff["lineage"] else ["The best node is the baseline."]
    out += ["", "### All accepted candidates", ""]
    out += table(MUTATION_HEADER, _mutations(eff["accepted"])) if eff["accepted"] else ["None."]
    return out


def _per_task(f: dict[str, Any]) -> list[str]:
    tasks = f["per_task"]
    changed = [t for t in tasks if t["change"] != "same"]
    out = ["## Per-task (assertion-level) changes", ""]
    if not tasks:
        return [*out, "No test rollouts recorded."]
    rows: list[Row] = [
        [
            t["task"],
            t["group"],
            f"{t['baseline_passes']}/{t['baseline_runs']}",
            f"{t['final_passes']}/{t['final_runs']}",
            t["change"],
        ]
        for t in changed
    ]
    out += table(["Task", "Group", "Baseline", "Final", "Change"], rows) if rows else ["No task changed."]
    return [*out, "", f"{len(tasks) - len(changed)} of {len(tasks)} test tasks unchanged (passes / test runs)."]


def _failed(f: dict[str, Any]) -> list[str]:
    rows: list[Row] = [
        [m["iteration"], m["node"], m["status"], m["origin"], m["hypothesis"], m["reason"]]
        for m in f["failed_mutations"]
    ]
    out = ["## Failed mutations", ""]
    return out + (table(["Iteration", "Node", "Status", "Origin", "Hypothesis", "Reason"], rows) if rows else ["None."])


def _decisions(f: dict[str, Any]) -> list[str]:
    d = f.get("decisions") or {"rows": [], "decided": 0, "close_calls": 0, "evidence_rollouts": 0}
    out = [
        "## Decisions and their evidence",
        "",
        f"{d['decided']} candidate(s) decided; {d['close_calls']} close call(s) gathered evidence on more train tasks, "
        f"{d['evidence_rollouts']} rollout(s) in all. P(better) is the confidence that the candidate beats its parent "
        "(a paired sign test over the tasks compared).",
        "",
    ]
    rows: list[Row] = [
        [r["iteration"], r["node"], r["decision"], _num(r["confidence"], 2), f"{_g(r['wins'])} / {_g(r['losses'])}",
         r["tasks"], r["rounds"], r["rollouts"], r["stopped"]]
        for r in d["rows"]
    ]  # fmt: skip
    header = ["Iteration", "Node", "Decision", "P(better)", "Wins / losses", "Tasks", "Rounds", "Rollouts", "Stopped"]
    return out + (table(header, rows) if rows else ["None."])


def _rates(title: str, stats: dict[str, dict[str, Any]]) -> list[str]:
    rows: list[Row] = [
        [name, s["patches"], f"{s['share']:.0%}", s["accepted"], f"{s['acceptance_rate']:.0%}"]
        for name, s in stats.items()
    ]
    return table([title, "Patches", "Share", "Accepted", "Acceptance"], rows)


def _patch_kinds(f: dict[str, Any]) -> list[str]:
    pk = f["patch_kinds"]
    out = ["## Patch kinds", "", f"{pk['patches']} diagnosis patches decided.", ""]
    if pk["patches"]:
        out += [*_rates("Kind", pk["by_kind"]), "", *_rates("Subtype", pk["by_subtype"])]
    if pk["evolution"]:
        ops = ", ".join(f"{k} {v}" for k, v in pk["evolution"].items())
        out += ["", f"Evolution operations: {ops}."]
    return out


def _cost(f: dict[str, Any]) -> list[str]:
    c = f["cost"]
    ro, se, tr = c["rollouts"], c["sessions"], c["traces_used"]
    split = ", ".join(f"{k} {v}" for k, v in ro["by_split"].items())
    roles = ", ".join(f"{role} {v['count']}" for role, v in se["by_role"].items())
    rows: list[Row] = [
        ["Rollouts executed", f"{ro['total']} ({split})"],
        ["Infra errors (count nowhere)", infra_text(ro["infra_errors"], ro["total"])],
        ["Rollout cost (USD)", f"{ro['cost_usd']:.4f}"],
        ["Traces used by diagnosis", f"{tr['total']} ({tr['distinct']} distinct)"],
        ["Optimizer sessions", f"{se['count']} ({roles})" if roles else se["count"]],
        ["Optimizer CLI runs (retries included)", se["cli_attempts"]],
        ["Optimizer turns", se["turns"]],
        ["Optimizer tokens in / out", f"{se['tokens_in']} / {se['tokens_out']}"],
        ["Optimizer cost (USD)", f"{se['cost_usd']:.4f}"],
        ["Wall time", _duration(c["wall_time_s"])],
    ]
    return ["## Cost", "", *table(["Item", "Value"], rows)]


def infra_text(errors: int, total: int) -> str:
    """`N of M rollouts (P%)`: the share of rollouts that could not run (their scores count nowhere)."""
    return f"{errors} of {total} rollouts ({100 * errors / total:.1f}%)" if total else "0"


def metric_lines(f: dict[str, Any]) -> list[str]:
    """The grep-able `metric: value` lines closing the report (`nan` when a figure is missing)."""
    s = f["summary"]
    return [
        metric_line("baseline_test", s["test"]["baseline"]["mean"]),
        metric_line("best_test", s["test"]["final"]["mean"]),
        metric_line("delta_test", s["test"]["delta"]),
        metric_line("baseline_dev", s["dev"]["baseline"]["mean"]),
        metric_line("best_dev", s["dev"]["final"]["mean"]),
        *(
            [
                f"baseline_test_metric: {_g(s['metric']['test']['baseline'])}",
                f"best_test_metric: {_g(s['metric']['test']['final'])}",
            ]
            if s.get("metric")
            else []
        ),
        f"best_node: {f['best']['node'] if f['best'] else 'none'}",
        f"iterations: {f['counts']['iterations']}",
        f"rollouts: {f['cost']['rollouts']['total']}",
        f"infra_errors: {f['cost']['rollouts']['infra_errors']}",
        f"optimizer_cost_usd: {f['cost']['sessions']['cost_usd']:.4f}",
    ]


def render_report(f: dict[str, Any]) -> str:
    """The whole report.md text for the figures `f`."""
    run = f["run"]
    head = [
        f"# Saddler report: {run['name']}",
        "",
        f"**Run:** {run['id']} · benchmark `{run['benchmark']}` · seed {run['seed']} · status {run['status']}  ",
        f"**Started – finished:** {run['started_at']} – {run['finished_at'] or '…'} "
        f"(wall time {_duration(run['wall_time_s'])})  ",
        f"**Termination:** {run['termination_reason'] or '—'}",
    ]
    kind = f["summary"].get("score", "pass_rate")
    meaning = f"**Score:** `{kind}`: {SCORE_MEANINGS.get(kind, kind)}; batch acceptance, dev and test all use it.  "
    head.insert(len(head) - 1, meaning)
    if f["best"]:
        head += ["", f"Best node (highest dev score): #{f['best']['node']} `{f['best']['commit']}`."]
    errors, total = f["cost"]["rollouts"]["infra_errors"], f["cost"]["rollouts"]["total"]
    if errors:
        head += ["", f"**Infra errors:** {infra_text(errors, total)} could not run (the benchmark or the machine "
                     "failed, not the harness): their scores count in no figure of this report."]  # fmt: skip
    sections = [
        head,
        _summary(f),
        ["![progress](progress.png)"],
        _effective(f),
        minimized_section(f),
        _per_task(f),
        _failed(f),
        _decisions(f),
        _patch_kinds(f),
        _cost(f),
        ["## Metrics", "", "```", *metric_lines(f), "```"],
    ]
    return "\n\n".join("\n".join(s) for s in sections if s) + "\n"

"""The report's "Minimized" section: the best harness cut to the changes that carry their weight on dev
(`saddler.minimized`), with the full and the minimized harness's dev and test, and what each change carries."""

from __future__ import annotations

from typing import Any

from evodag.metric import run_metric, score_text
from evodag.models import Node
from evodag.store import EvoDAG
from saddler.minimized import minimization


def minimized_figures(store: EvoDAG, run_id: int, nodes: dict[int, Node], best_id: int | None) -> dict[str, Any] | None:
    """The section's figures (JSON-serialisable), or None when the run's best was not minimized."""
    found = minimization(store, run_id, best_id) if best_id is not None else None
    if found is None:
        return None
    full, small = nodes.get(found.best_node), nodes.get(found.node)
    test = [n.test_mean if n is not None else None for n in (full, small)]
    out = found.to_json()
    for change in out["contributions"]:
        change.pop("patch")
    scale = run_metric(store, run_id)
    shown = [score_text(t, scale) for t in test]
    return {**out, "test": test, "test_shown": shown, "summary": found.summary(scale)}


RULES = {"not_lower": "lower", "not_clearly_worse": "clearly worse (the acceptance rule's P(better))"}


def minimized_section(f: dict[str, Any]) -> list[str]:
    """Markdown lines of the section ([] when the run has no minimization)."""
    m = f.get("minimized")
    if not m:
        return []
    full, small = m["test_shown"]
    answer = (
        f"`best/` holds the minimized harness (#{m['node']})"
        if m["node"] != m["best_node"]
        else "every change carries its weight: `best/` holds the full harness"
    )
    out = [
        "## Minimized",
        "",
        f"The best harness (#{m['best_node']}) cut to the changes that carry their weight on dev: **{m['summary']}** "
        f"({m['lines'][0]} → {m['lines'][1]} diff lines), test {full} → {full if m['test'][1] is None else small}"
        f"; {answer}. Each change was removed in turn and put back when dev without it was {RULES[m['rule']]} "
        "(a dev evaluation stops once that is certain: its points are then those of the tasks it ran). "
        f"{m['rollouts']} dev rollouts, counted in the run's budget; stopped: {m['stopped']}.",
        "",
        "| Change | File | Hunk | Lines | Edge | Dev points | Kept |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in m["contributions"]:
        points = "not measured" if c["dev_points"] is None else f"{c['dev_points']:+.3f}"
        if c["dev_tasks"] is not None and c["dev_tasks"] < m["dev_tasks"]:  # stopped once sure to be lower
            points = f"{points} ({c['dev_tasks']} of {m['dev_tasks']} tasks)"
        edge = "—" if c["edge"] is None else str(c["edge"])
        hunk = str(c["header"]).replace("|", "\\|")
        out.append(
            f"| {c['change']} | `{c['file']}` | `{hunk}` | {c['lines']} | {edge} | {points} | "
            f"{'yes' if c['kept'] else 'no'} |"
        )
    return out

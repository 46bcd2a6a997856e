"""`results.tsv` in the autoresearch format, `commit  metric  status  description`, one row per node, and a last
column `scored_on` that says what the metric is.

The baseline comes first (status keep), then every decided candidate in iteration order. metric = dev mean
when the node was evaluated on dev (scored_on `dev`), else its batch score after the patch (`batch`: a mini-batch
of train tasks, not comparable with dev), else 0.0000 (autoresearch's value for a crash; `none`); in the
benchmark's own metric (its unit, 6 significant digits) when the run ranks on one.
status: keep (accepted / neutral), discard (rejected), crash (invalid). Pending nodes (not decided yet) are
left out, and so are the minimization's cuts (origin `minimize`: report.md's "Minimized" section lists them).
"""

from __future__ import annotations

from pathlib import Path

from evodag.decisions import STATUS_TSV
from evodag.metric import run_metric
from evodag.models import Node
from evodag.store import EvoDAG
from saddler.files import write_text_atomic
from saddler.minimized import ORIGIN as MINIMIZE_ORIGIN
from saddler.reporting.figures import hypothesis_summary
from saddler.scoring import figure

HEADER = ("commit", "metric", "status", "description", "scored_on")


def _one_line(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def describe(node: Node) -> str:
    """`origin: hypothesis` on one line (just the origin when there is no hypothesis text)."""
    if node.status == "baseline":
        return "baseline"
    summary = hypothesis_summary(node, limit=200)
    return _one_line(summary if summary == node.origin else f"{node.origin}: {summary}")


def result_rows(store: EvoDAG, run_id: int | None = None) -> list[tuple[str, str, str, str, str]]:
    """The TSV rows (without header) of the run, latest run when `run_id` is None."""
    run = store.get_run(run_id)
    nodes = [n for n in store.nodes(run.id) if n.status in STATUS_TSV and n.origin != MINIMIZE_ORIGIN]
    nodes.sort(key=lambda n: (n.status != "baseline", n.iteration, n.id))
    dev_scale, batch_scale = run_metric(store, run.id), run_metric(store, run.id, batch=True)
    rows = []
    for node in nodes:
        score, scale = (node.dev_mean, dev_scale) if node.dev_mean is not None else (node.batch_after, batch_scale)
        metric = scale.plain(score) if scale is not None and score is not None else figure(score or 0.0)
        scored_on = "dev" if node.dev_mean is not None else "batch" if node.batch_after is not None else "none"
        rows.append((node.commit[:7], metric, STATUS_TSV[node.status], describe(node), scored_on))
    return rows


def write_results_tsv(store: EvoDAG, path: Path, run_id: int | None = None) -> Path:
    """Write the header and `result_rows` to `path` (tab-separated, newline-terminated); returns `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(HEADER)] + ["\t".join(row) for row in result_rows(store, run_id)]
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path

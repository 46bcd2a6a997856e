"""`report.html` beside report.md: the dashboard's views of one run in one self-contained file.

Every script, the stylesheet and the run's views (`evodag.dashboard.run_views` with every node's and task's
page) are inlined (`saddler.ui.page.static_html`): the file opens from disk and makes no network request. It follows
the same held-out rule as the dashboard (test results only once the run has finished).
"""

from __future__ import annotations

from pathlib import Path

from evodag.dashboard import run_views
from evodag.store import EvoDAG
from saddler.files import write_text_atomic
from saddler.ui.page import static_html

REPORT_HTML = "report.html"


def write_report_html(store: EvoDAG, run_dir: Path, run_id: int | None = None) -> Path:
    """Write `run_dir/report.html` for run `run_id` (default: the latest), replaced whole; returns its path."""
    run = store.get_run(run_id)
    meta = {"index": 0, "label": Path(run_dir).resolve().name, "path": str(run_dir), "run_id": run.id,
            "name": run.config.get("name", Path(run_dir).name), "status": run.status}  # fmt: skip
    path = Path(run_dir) / REPORT_HTML
    write_text_atomic(path, static_html([{"meta": meta, "views": run_views(store, run.id, pages=True)}]))
    return path

"""The dashboard page: `static/index.html` with its styles and scripts linked (the server) or inlined (report.html).

`live_html()` links `/static/...` and reads the data from the JSON API; `static_html(runs)` inlines every script,
the stylesheet and the runs' views (`evodag.dashboard.run_views` with `pages`) as JSON, so the file opens from
disk and makes no network request. The scripts are the vendored libraries (`static/vendor/VENDORED.md`) and
`app.js`; nothing is fetched at run time.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

SCRIPTS = ("vendor/cytoscape.min.js", "vendor/cytoscape-dagre.min.js", "app.js")
STYLES = ("app.css",)
SERVED = frozenset((*SCRIPTS, *STYLES))


def asset(name: str) -> bytes | None:
    """The bytes of a served asset (`SERVED`), or None for any other name."""
    if name not in SERVED:
        return None
    return resources.files("saddler.ui").joinpath("static", *name.split("/")).read_bytes()


def _text(name: str) -> str:
    data = asset(name)
    assert data is not None, name
    return data.decode("utf-8")


def _template() -> str:
    return resources.files("saddler.ui").joinpath("static", "index.html").read_text(encoding="utf-8")


def _inline_script(text: str) -> str:
    return "<script>" + text.replace("</script", "<\\/script") + "</script>"


def live_html() -> str:
    """The page the server sends: assets linked under /static/, data read from /api/."""
    styles = "".join(f'<link rel="stylesheet" href="/static/{s}">' for s in STYLES)
    scripts = "".join(f'<script src="/static/{s}"></script>' for s in SCRIPTS)
    return _template().replace("<!--STYLES-->", styles).replace("<!--SCRIPTS-->", scripts).replace("<!--DATA-->", "")


def shared_diffs(views: dict[str, Any]) -> dict[str, Any]:
    """`views` (with `nodes` pages) with each baseline-diff step whose diff is its child's own diff replaced by
    `"diff_of": child id` (the page looks it up): every diff is inlined once, not once per descendant."""
    pages = views.get("nodes", {})
    for doc in pages.values():
        for seg in (doc.get("baseline_diff") or {}).get("segments", []):
            for step in seg["steps"]:
                own = pages.get(str(step["child_id"]))
                if own is not None and own.get("diff") == step.get("diff"):
                    del step["diff"]
                    step["diff_of"] = step["child_id"]
    return views


def static_html(runs: list[dict[str, Any]]) -> str:
    """One self-contained page: every asset inlined and `runs` (each `{"meta": run_list entry, "views": ...}`)
    as an inline JSON document the page reads instead of the API."""
    styles = "".join("<style>" + _text(s) + "</style>" for s in STYLES)
    scripts = "".join(_inline_script(_text(s)) for s in SCRIPTS)
    runs = [{**r, "views": shared_diffs(r["views"])} for r in runs]
    data = json.dumps({"runs": runs}, default=str, separators=(",", ":")).replace("</", "<\\/")
    blob = f'<script type="application/json" id="saddler-data">{data}</script>'
    return _template().replace("<!--STYLES-->", styles).replace("<!--DATA-->", blob).replace("<!--SCRIPTS-->", scripts)

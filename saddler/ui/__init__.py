"""`saddler ui` and report.html: the run dashboard (graph, timeline, node and task pages, progress, side by side).

A thin layer over `evodag.dashboard` (the one query layer): `api` maps URL paths onto its views, `server` serves
them with the page from the standard library, `page` assembles the page (linked assets for the server, every
asset and the data inlined for report.html). The JavaScript libraries are vendored in `static/vendor/`.
"""

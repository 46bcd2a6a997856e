"""The hidden grader: fail-to-pass and pass-to-pass tests on the checkout the agent leaves, as SWE-Bench Pro does.

`grade(spec, workspace)` returns a `simmodel.Grade` with one check per hidden fail-to-pass test (`f2p:<test>`),
one per pass-to-pass test file that guards the change (`p2p:<file>`), `p2p:suite` for the rest of the
repository's tests and, where the repository has style rules, `style`. Test files are the oracle's own: what
the agent changed in them does not count. Known-flaky tests are not graded. Score = share of checks passed;
the task passes only when all pass.
"""

from __future__ import annotations

from benchmarks.repofix.analysis import style_violations
from benchmarks.repofix.behaviour import is_source
from benchmarks.repofix.env import Workspace, module_of_test
from benchmarks.simmodel import Grade

STATE_WHY = {
    "unfixed": "the bug is still there",
    "partial": "only the reported case is handled",
    "wrong": "the change does not fix it",
    "missing": "the module does not load or the function is gone",
}


def grade(spec: object, ws: Workspace) -> Grade:
    """Grade the final checkout of `spec` (a TaskSpec)."""
    params = spec.params  # type: ignore[attr-defined]
    behaviour = ws.behaviour()
    files = {**ws.files, **{p: t for p, t in ws.original.items() if "/tests/" in f"/{p}"}}  # the oracle's tests
    g = Grade()
    for name, indexes, case in params["f2p"]:
        bad = [i for i in indexes if not behaviour.case_passes(i, case)]
        site = params["sites"][bad[0]] if bad else None
        why = f"{site['func'] or site['symbol']}: {STATE_WHY.get(behaviour.site_state(bad[0]), '')}" if site else ""
        g.add(f"f2p:{name}", not bad, why)
    guarded = set()
    for test_path in params["p2p"]:
        module = module_of_test(test_path, files)
        guarded.add(module)
        error = behaviour.load_error(module)
        broken = behaviour.broken(module)
        why = error or f"{', '.join(f'test_{f}' for f in broken[:3])} fail: behaviour changed"
        g.add(f"p2p:{test_path}", not error and not broken, why)
    guarded |= {s["path"] for s in params["sites"]}
    problems = []
    for path in sorted(p for p in ws.files if is_source(p) and p not in guarded):
        error = behaviour.load_error(path)
        broken = behaviour.broken(path) if not error else []
        if error or broken:
            problems.append(f"{path}: {error or 'changed ' + ', '.join(broken[:2])}")
    g.add("p2p:suite", not problems, "; ".join(problems[:3]))
    if ws.repo.max_line:
        rules = {"max_line": ws.repo.max_line, "indent": ws.repo.indent, "quote": ws.repo.quote}
        found = [
            v for p in behaviour.changed_sources() for v in style_violations(p, ws.files[p], ws.original[p], rules)
        ]
        g.add("style", not found, "; ".join(found[:3]))
    return g

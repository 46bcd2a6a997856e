"""How the simulated model goes about a bug report (part of the fixed model, not of the harness).

One workflow for every family, as a coding agent has: maybe reproduce the issue first, locate the code
(search, then read), draft a fix with the family's typical mistakes, edit, then verify (the reproduction, the
tests, a lint) and mend what the verification shows. `verify.py` holds the second half.
"""

from __future__ import annotations

import re

from benchmarks.repofix.agent import (
    P_BLIND_EDIT,
    P_FORGET_SITE,
    P_FORGET_SITE_TOLD,
    P_NOTICE_COPY,
    P_OVERBROAD,
    P_PARTIAL,
    P_PARTIAL_TOLD,
    P_REFINE,
    P_REPRO,
    P_RETRY,
    P_SYNTAX,
    P_TEST_EDIT,
    P_TEST_EDIT_TOLD,
    REFIX_SCALE,
    SLIP,
    STYLE_SLIPS,
    GiveUp,
    SimCoder,
    parse_hits,
)
from benchmarks.repofix.behaviour import module_name

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

    from benchmarks.repofix.agent import Step

SEARCH = "search code for text"
VIEW = "view file lines around a line number"
OPEN = "open file read content"
EDIT = "edit file replace text"


def is_copy(path: str) -> bool:
    return path.startswith(("build/", "docs/")) or "/build/" in path


def is_test(path: str) -> bool:
    return path.rsplit("/", 1)[-1].startswith("test_") or "/tests/" in f"/{path}"


def solve(a: SimCoder) -> Step:
    """The whole episode up to the first submission; returns the summary it submits."""
    from benchmarks.repofix.verify import reproduce, verify

    family = a.spec.family
    if a.told("reproduce") or a.chance("repro_habit", P_REPRO):
        yield from reproduce(a)
    if family == "multi_file":
        yield from fix_multi(a)
    elif family == "wrong_import":
        yield from fix_import(a)
    elif family == "flaky_test" and a.mistake(
        "test_edit", P_TEST_EDIT_TOLD if a.told("no_test_edits") else P_TEST_EDIT
    ):
        yield from edit_test(a)
    else:
        yield from fix_site(a, 0)
    yield from verify(a)
    return f"Fixed: {a.spec.prompt.split(': ', 1)[-1][:80]}"


# locating and reading ------------------------------------------------------------------------------------


def search(a: SimCoder, term: str) -> Step:
    obs = yield from a.use(SEARCH, {"pattern": term}, "search")
    return parse_hits(obs["text"]) if obs["ok"] else ([], False)


def pick_def(a: SimCoder, hits: list[tuple[str, int, str]], name: str) -> tuple[str, int, str] | None:
    """The definition of `name` the model takes among the hits it can see (a stale copy, unless it notices)."""
    for hit in hits:
        if f"def {name}(" not in hit[2] or is_test(hit[0]) or hit[0].startswith("docs/"):
            continue
        if is_copy(hit[0]) and (a.facts.get("avoid_copies") or a.chance("notice_copy", P_NOTICE_COPY)):
            a.note(f"{hit[0]} is build output, not the source")
            continue
        return hit
    return None


def locate(a: SimCoder, name: str, term: str) -> Step:
    """(path, line, text) of where `name` is defined, or None."""
    hits, more = yield from search(a, term)
    found = pick_def(a, hits, name)
    if found is None and (more or not hits) and term != f"def {name}(" and a.chance("refine", P_REFINE):
        hits, more = yield from search(a, f"def {name}(")
        found = pick_def(a, hits, name)
    if found is None:
        a.log({"type": "not_located", "what": name, "term": term, "hits": len(hits), "cut": more})
    return found


def read(a: SimCoder, path: str, line: int, want: str) -> Step:
    """Read around `line` of `path` (a line range when a tool offers one, else the whole file); the text seen."""
    viewer = a.pick(VIEW)
    if viewer and a.accepts(viewer, "start"):
        obs = yield from a.use(VIEW, {"path": path, "start": max(1, line - 12), "end": line + 20}, "files")
    else:
        obs = yield from a.use(OPEN, {"path": path}, "files")
    text = obs["text"] if obs["ok"] else ""
    a.seen[path] = text
    if want and want not in text:
        a.log({"type": "missing_in_output", "path": path, "wanted": want.strip(), "truncated": "[truncated" in text})
    return text


def context_lines(a: SimCoder, path: str, func: str, line: str) -> str:
    """The lines from `def func(` down to `line` as the model saw them ('' when it did not see them)."""
    seen = [re.sub(r"^\s*\d+ \| ", "", row) for row in a.seen.get(path, "").split("\n")]
    start = next((i for i, row in enumerate(seen) if row.startswith(f"def {func}(")), None)
    if start is None:
        return ""
    for end in range(start, len(seen)):
        if seen[end] == line:
            return "\n".join(seen[start : end + 1])
    return ""


# drafting --------------------------------------------------------------------------------------------------


def draft(a: SimCoder, site: dict[str, Any], second: bool = False) -> tuple[str, str]:
    """(the text the model writes, the text it meant): the family's typical mistake, then style slips."""
    scale = REFIX_SCALE if second else 1.0
    kind = site["kind"]
    if kind == "edge_case":
        partial = a.mistake("partial", (P_PARTIAL_TOLD if a.told("edge_cases") else P_PARTIAL) * scale)
        meant = site["partial"] if partial else site["fixed"][0]
    elif kind in SLIP and "slip" in site and a.mistake("slip", SLIP[kind] * scale):
        meant = site["slip"]
    else:
        meant = site["fixed"][int(a.u("variant") * len(site["fixed"]))]
    return slips(a, meant, site["buggy"], scale), meant


def slips(a: SimCoder, text: str, buggy: str, scale: float = 1.0) -> str:
    """Formatting slips on the lines of `text` that are new: wrong quotes or indentation for this repository,
    an explanatory comment that makes a line too long, trailing blanks, and now and then broken syntax."""
    repo, told = a.repo, a.told("style")
    lines = text.split("\n")
    new = [i for i, row in enumerate(lines) if row not in buggy.split("\n")]
    if not new:
        return text

    def slip(name: str) -> bool:
        return a.mistake(f"style:{name}", STYLE_SLIPS[name][1 if told else 0] * scale)

    if repo.quote == "'" and "'" in "".join(lines[i] for i in new) and slip("quotes"):
        lines = [row.replace("'", '"') if i in new else row for i, row in enumerate(lines)]
    if repo.indent == 2 and len(lines) > 1 and slip("indent"):
        lines = [" " * (2 * _width(row)) + row.lstrip(" ") if i in new else row for i, row in enumerate(lines)]
    first = new[0]
    if slip("comment"):
        reason = " ".join(a.spec.prompt.split(": ", 1)[-1].split()[:14])
        lines[first] = (lines[first] + f"  # issue {a.spec.id}: {reason}")[:96]
    if slip("trailing"):
        lines[first] += "  "
    if a.mistake("syntax", P_SYNTAX * scale):
        row = lines[first]
        lines[first] = row[: row.rindex(")")] + row[row.rindex(")") + 1 :] if ")" in row else row.rstrip(":") + " ("
    return "\n".join(lines)


def _width(row: str) -> int:
    return len(row) - len(row.lstrip(" "))


# editing ---------------------------------------------------------------------------------------------------


def edit(
    a: SimCoder, path: str, old: str, new: str, *, target: str, meant: str = "", func: str = "", head: str = ""
) -> Step:
    """Replace `old` by `new` in `path`; redo it on a refusal it understands. True when an edit was made. `head`
    is the unchanged context `old` and `new` start with (the lines from the function's `def` down)."""
    from benchmarks.repofix.verify import process_notices

    for _attempt in range(3):
        obs = yield from a.use(EDIT, {"path": path, "old": old, "new": new}, "edit")
        if obs["ok"]:
            a.edits.append({"path": path, "old": old, "new": new, "target": target, "meant": meant or new,
                            "func": func, "head": head})  # fmt: skip
            yield from process_notices(a)
            return True
        message = obs["text"]
        if re.search(r"occurs \d+ times|more than once|not unique", message) and a.chance("retry", P_RETRY):
            context = context_lines(a, path, func, old.split("\n")[-1]) if func else ""
            if context and context != old:
                head = context[: -len(old.split("\n")[-1])]
                old, new, meant = context, head + new, head + (meant or new)
                continue
        if re.search(r"SyntaxError|IndentationError", message) and a.chance("retry", P_RETRY):
            new = meant or new
            continue
        a.note(f"the edit of {path} did not go through: {message[:120]}")
        return False
    return False


def fix_site(a: SimCoder, index: int, second: bool = False) -> Step:
    """Locate, read and fix one planted site (off_by_one, edge_case, api_misuse, flaky_test)."""
    site = a.spec.params["sites"][index]
    func = site["func"]
    found = yield from locate(a, func, a.spec.params["search"])
    if found is None:
        raise GiveUp("not_located", f"could not find where {func} is defined")
    path, line, _ = found
    text = yield from read(a, path, line, site["buggy"])
    if site["kind"] == "api_misuse" and not second and a.mistake("overbroad", P_OVERBROAD):
        done = yield from overbroad(a, site)
        if done:
            return
    old = site["buggy"]
    if old not in text and not a.chance("blind", P_BLIND_EDIT):
        old = old.replace(" - ", "-").replace(" // ", "//").replace(" = ", "=") + " "  # a near miss
    elif a.told("unique") and site["buggy"] in text:
        old = context_lines(a, path, func, site["buggy"]) or old
    new, meant = draft(a, site, second)
    head = old[: -len(site["buggy"])] if old != site["buggy"] and old.endswith(site["buggy"]) else ""
    yield from edit(a, path, old, head + new, target=f"site:{index}", meant=head + meant, func=func, head=head)


def overbroad(a: SimCoder, site: dict[str, Any]) -> Step:
    """Change the shared wrapper's default instead of the call (every caller gets the new behaviour)."""
    helper = site["helper"]
    found = yield from locate(a, helper["func"], helper["func"])
    if found is None:
        return False
    yield from read(a, found[0], found[1], helper["def"])
    a.note(f"changing the default of {helper['func']} so that {site['func']} gets it right")
    return (yield from edit(a, found[0], helper["def"], helper["overbroad"], target="helper", func=helper["func"]))


def edit_test(a: SimCoder) -> Step:
    """flaky_test, the wrong way: make the failing test retry instead of fixing what makes it flaky."""
    test_id = a.spec.params["flaky_test"]
    path, name = test_id.split("::")
    yield from read(a, path, 1, f"def {name}(")
    a.note("the test is flaky: letting it retry")
    old = f"def {name}():"
    yield from edit(a, path, old, f"@pytest.mark.flaky(reruns=3)\n{old}", target="test", func=name)


def fix_import(a: SimCoder) -> Step:
    """wrong_import: find where the name lives now and import it from there."""
    site = a.spec.params["sites"][0]
    yield from read(a, site["path"], 3, site["buggy"])
    found = yield from locate(a, site["symbol"], site["symbol"])
    if found is None:
        raise GiveUp("not_located", f"could not find where {site['symbol']} is defined")
    yield from import_from(a, found[0])


def import_from(a: SimCoder, path: str) -> Step:
    site = a.spec.params["sites"][0]
    rel = path.removeprefix("build/lib/")
    module = module_name(rel) if "/src/" in f"/{rel}" else rel.removesuffix(".py").replace("/", ".")
    current = next((e["new"] for e in reversed(a.edits) if e["target"] == "site:0"), site["buggy"])
    new = slips(a, f"from {module} import {site['symbol']}", current)
    yield from edit(a, site["path"], current, new, target="site:0", meant=f"from {module} import {site['symbol']}")


def fix_multi(a: SimCoder) -> Step:
    """multi_file: find every place that writes the old key and rename it there."""
    params = a.spec.params
    old_key = params["search"]
    hits, more = yield from search(a, old_key)
    writers = _writers(hits, old_key)
    if not writers and more and a.chance("refine", P_REFINE):
        hits, more = yield from search(a, f"{a.repo.quote}{old_key}{a.repo.quote}]")
        writers = _writers(hits, old_key)
    if not writers:
        raise GiveUp("not_located", f"found no place that writes {old_key}")
    yield from rename_writers(a, writers, forgetful=True)


def _writers(hits: list[tuple[str, int, str]], key: str) -> list[tuple[str, int, str]]:
    return [h for h in hits if "settings[" in h[2] and key in h[2] and "=" in h[2] and not is_test(h[0])]


def rename_writers(a: SimCoder, writers: list[tuple[str, int, str]], forgetful: bool) -> Step:
    params = a.spec.params
    sites = params["sites"]
    told = a.told("all_sites")
    done = {e["path"] for e in a.edits}
    for k, (path, line, text) in enumerate(writers):
        if path in done:
            continue
        if is_copy(path) and (a.facts.get("avoid_copies") or a.chance("notice_copy", P_NOTICE_COPY)):
            continue
        if forgetful and k and a.mistake("forget_site", P_FORGET_SITE_TOLD if told else P_FORGET_SITE):
            a.note(f"{path}:{line} looks like the same change; leaving it")
            continue
        yield from read(a, path, line, text)
        index = next((i for i, s in enumerate(sites) if s["path"] == path and s["buggy"] == text), None)
        if index is None:
            meant = text.replace(params["search"], params["new_key"])
            new = slips(a, meant, text)
        else:
            new, meant = draft(a, sites[index])
        yield from edit(a, path, text, new, target=f"site:{index}" if index is not None else "copy", meant=meant)

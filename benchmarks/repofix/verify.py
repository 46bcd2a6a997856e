"""The second half of the simulated model's workflow: checking its own fix and mending what the checks show.

- a reproduction script (when it has tools to write and run one): run before the fix, rerun after it; if the
  issue still reproduces, it drafts the fix again (a copy it edited by mistake is noticed here);
- the tests (a selection when the test tool takes paths): a failure in code it changed is mended (surely with
  the failure message in view, rarely from the test name alone); a failure elsewhere is rerun when it was told
  to, otherwise it may believe its change caused it and revert the change;
- a lint of the files it changed (when a lint tool exists and it was told to, or by habit);
- calls the loop made on its behalf (a forced test run) and loop messages (a refused submission, an automatic
  revert) are handled at the next step.
"""

from __future__ import annotations

import re

from benchmarks.repofix.agent import (
    P_CHASE,
    P_LINT,
    P_REDO,
    P_REPAIR,
    P_REPAIR_BLIND,
    P_TESTS,
    SimCoder,
    parse_run,
)
from benchmarks.repofix.plans import draft, edit, fix_site, import_from, is_copy, is_test, rename_writers, search

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

    from benchmarks.repofix.agent import Step

REPRO = "repro_issue.py"
CREATE = "create new file with content"
RUN_SCRIPT = "run python script file"
TESTS = "run the tests"
LINT = "lint file style"


# the reproduction ------------------------------------------------------------------------------------------


def repro_script(a: SimCoder) -> str:
    """A script that exercises what the issue reports, from what the model knows now."""
    params, family = a.spec.params, a.spec.family
    site = params["sites"][0]
    if family == "wrong_import":
        return f"import {site['module']}\nprint('imported')\n"
    if family == "multi_file":
        writers = [s["func"] for e in a.edits if (s := _site_of(a, e))]
        reader = params["reader"]
        lines = [f"from {params['sites'][0]['module']} import {reader}"]
        lines += [f"assert {reader}({w}({{}}, 7)) == 7" for w in writers] or [f"assert {reader}({{}}) is not None"]
        return "\n".join(lines) + "\n"
    call = {"edge_case": "[]"}.get(family, "SAMPLE")
    lines = [f"from {site['module']} import {site['func']}", ""]
    if family == "flaky_test":
        lines += ["for attempt in range(10):", f"    assert {site['func']}({call}) == EXPECTED"]
    else:
        lines.append(f"assert {site['func']}({call}) == EXPECTED")
    if family == "edge_case" and (a.told("edge_cases") or a.chance("repro_none", 0.3)):
        lines.append(f"assert {site['func']}(None) == EXPECTED")
    return "\n".join(lines) + "\n"


def _site_of(a: SimCoder, edit_record: dict[str, Any]) -> dict[str, Any] | None:
    target = edit_record["target"]
    if target.startswith("site:") and target != "site:None":
        site: dict[str, Any] = a.spec.params["sites"][int(target.split(":")[1])]
        return site
    return None


def reproduce(a: SimCoder) -> Step:
    """Write the reproduction and run it; True when the issue reproduces."""
    if "scripts" in a.unavailable:
        return None
    created = yield from a.try_use(CREATE, {"path": REPRO, "content": repro_script(a)}, "scripts", at_least=4)
    if created is None:
        return None
    out = yield from a.try_use(RUN_SCRIPT, {"path": REPRO}, "scripts")
    if out is None:
        return None
    a.facts["repro"] = True
    return "still reproduces" in out["text"] or "Error" in out["text"]


def check_repro(a: SimCoder) -> Step:
    """After the fix: rerun the reproduction and draft the fix again while the issue still reproduces."""
    if not a.facts.get("repro"):
        return
    for _round in range(2):
        failing = yield from reproduce(a)
        if not failing:
            return
        a.note("the issue still reproduces after my change")
        a.log({"type": "repro_failed"})
        yield from refix(a)


def refix(a: SimCoder) -> Step:
    """A second attempt at the fix, informed by a reproduction that still fails."""
    family, params = a.spec.family, a.spec.params
    if any(is_copy(e["path"]) for e in a.edits):
        a.facts["avoid_copies"] = True
        a.note("my edit went to a build copy; the package imports the source")
    if family == "wrong_import":
        hits, _more = yield from search(a, f"def {params['sites'][0]['symbol']}(")
        a.facts["avoid_copies"] = True
        found = next((h for h in hits if not is_copy(h[0]) and not is_test(h[0])), None)
        if found:
            yield from import_from(a, found[0])
        return
    if family == "multi_file":
        hits, _more = yield from search(a, params["search"])
        writers = [h for h in hits if "settings[" in h[2] and params["search"] in h[2] and not is_test(h[0])]
        yield from rename_writers(a, writers, forgetful=False)
        return
    mine = [e for e in a.edits if e["target"] == "site:0" and not is_copy(e["path"])]
    if not mine:  # nothing of its own in the source yet (a test edit, a copy, an edit that did not go through)
        yield from fix_site(a, 0, second=True)
        return
    last, site = mine[-1], params["sites"][0]
    new, meant = draft(a, site, second=True)
    head = last.get("head", "")
    if head + new == last["new"]:  # the fix looks right: the edit must have gone to another place of the file
        a.note(f"the change is right but the issue remains: my edit of {last['path']} hit another place")
        yield from edit(a, last["path"], last["new"], last["old"], target="revert", func=last["func"])
        a.edits = [e for e in a.edits if e is not last]
        a.reminded.add("unique")
        yield from fix_site(a, 0, second=True)
        return
    yield from edit(a, last["path"], last["new"], head + new, target="site:0", meant=head + meant, func=site["func"],
                    head=head)  # fmt: skip


# the tests -------------------------------------------------------------------------------------------------


def my_files(a: SimCoder) -> set[str]:
    return {e["path"] for e in a.edits if not is_test(e["path"]) and e["path"] != REPRO}


def test_and_repair(a: SimCoder) -> Step:
    """Run the tests (up to three rounds while it mends something) and act on what they show."""
    for _round in range(3):
        tool = a.pick(TESTS)
        args: dict[str, Any] = {}
        if tool and a.accepts(tool, "paths") and my_files(a):
            args["paths"] = sorted({_test_file_for(a, p) for p in my_files(a)} - {""})
        obs = yield from a.use(TESTS, args, "tests")
        changed = yield from react(a, parse_run(obs["text"]) if obs["ok"] else parse_run(""))
        if not changed:
            return


def _test_file_for(a: SimCoder, path: str) -> str:
    for site in a.spec.params["sites"]:
        if site["path"] == path:
            return str(site["test_path"])
        helper = site.get("helper")
        if helper and helper["path"] == path:
            return str(helper["test_path"])
    return ""


def react(a: SimCoder, run: dict[str, Any]) -> Step:
    """Mend or dismiss the failures a test run shows; True when it changed code and wants another run."""
    if (yield from handle_messages(a)):
        return True
    if run["timed_out"]:
        a.note("the test run timed out; no result to go on")
        return False
    failing = {**run["failed"], **run["errors"]}
    if not failing:
        if run["unseen_failure"]:
            a.log({"type": "failure_unseen"})
            a.note("tests failed but the output does not say which")
        return False
    mine = my_files(a)
    tests_of_mine = {_test_file_for(a, p) for p in mine} | mine
    changed = False
    for test_id, message in failing.items():
        related = test_id.split("::")[0] in tests_of_mine or any(p in message for p in mine)
        if related:
            if a.chance("repair", P_REPAIR if message else P_REPAIR_BLIND):
                changed = (yield from repair(a, test_id, message)) or changed
        elif a.told("rerun"):
            a.note(f"{test_id} fails in code I did not touch; rerunning it")
            tool = a.pick(TESTS)
            again = yield from a.use(TESTS, {"paths": [test_id]} if tool and a.accepts(tool, "paths") else {}, "tests")
            a.log(
                {"type": "rerun", "test": test_id, "passed": test_id not in parse_run(again.get("text", ""))["failed"]}
            )
        elif a.chance("chase", P_CHASE):
            changed = (yield from revert_last(a, f"{test_id} fails after my change")) or changed
    return changed


def repair(a: SimCoder, test_id: str, message: str) -> Step:
    """Mend its own breakage: style findings, a syntax or import error, a changed default, a wrong occurrence."""
    if test_id.endswith("::test_flake8"):
        return (yield from clean_style(a))
    syntax = re.search(r"SyntaxError|IndentationError|ImportError|ModuleNotFoundError", message)
    for record in reversed(a.edits):
        if syntax and record["path"] in message:
            if "Import" in message or "Module" in message:
                yield from refix(a)
                return True
            return (yield from edit(a, record["path"], record["new"], record["meant"], target=record["target"],
                                    meant=record["meant"], func=record["func"]))  # fmt: skip
        if record["target"] == "helper":
            a.note(f"{test_id} shows that the changed default breaks other callers; fixing the call instead")
            yield from edit(a, record["path"], record["new"], record["old"], target="revert", func=record["func"])
            a.edits = [e for e in a.edits if e is not record]
            yield from fix_site(a, 0, second=True)
            return True
    failed_func = test_id.split("::")[-1].removeprefix("test_")
    for record in reversed(a.edits):
        if record["func"] and record["func"] != failed_func and "\n" not in record["old"]:
            a.note(f"my edit of {record['path']} changed {failed_func} instead of {record['func']}")
            yield from edit(a, record["path"], record["new"], record["old"], target="revert", func=record["func"])
            a.edits = [e for e in a.edits if e is not record]
            a.reminded.add("unique")
            yield from fix_site(a, 0, second=True)
            return True
    return False


def revert_last(a: SimCoder, why: str) -> Step:
    """Undo its latest change to the source, believing it broke something."""
    record = next((e for e in reversed(a.edits) if not is_test(e["path"]) and e["path"] != REPRO), None)
    if record is None:
        return False
    a.log({"type": "chase", "why": why, "path": record["path"]})
    a.note(f"{why}: reverting my change to {record['path']}")
    yield from edit(a, record["path"], record["new"], record["old"], target="revert", func=record["func"])
    a.edits = [e for e in a.edits if e is not record]
    return True


def clean_style(a: SimCoder) -> Step:
    """Rewrite its own lines as it meant them (no comment, no trailing blanks, the repository's quotes)."""
    changed = False
    for record in list(a.edits):
        if record["new"] != record["meant"] and record["target"] != "revert":
            ok = yield from edit(a, record["path"], record["new"], record["meant"], target=record["target"],
                                 meant=record["meant"], func=record["func"])  # fmt: skip
            changed = changed or ok
    return changed


def lint_and_fix(a: SimCoder) -> Step:
    for path in sorted(my_files(a)):
        obs = yield from a.try_use(LINT, {"path": path}, "lint")
        if obs is None:
            return
        if obs["ok"] and re.search(r"\b[EWQ]\d{3,4}\b", obs["text"]):
            a.note(f"lint findings in {path}")
            yield from clean_style(a)
            return


# putting it together ---------------------------------------------------------------------------------------


def verify(a: SimCoder) -> Step:
    """Check the fix before the first submission."""
    yield from check_repro(a)
    if a.told("verify") or a.chance("test_habit", P_TESTS):
        yield from test_and_repair(a)
    if a.chance("lint_habit", P_LINT) or a.told("style"):
        yield from lint_and_fix(a)


def process_notices(a: SimCoder) -> Step:
    """Results of calls the loop made on the model's behalf (a forced test run): act on them like its own."""
    while a.notices:
        obs = a.notices.pop(0)
        if obs.get("ok") and "test session starts" in obs.get("text", ""):
            yield from react(a, parse_run(obs["text"]))


def handle_messages(a: SimCoder) -> Step:
    """Act on what the loop said: after an automatic revert, draft the fix again (or let it go). True when it
    changed code."""
    messages, a.messages = a.messages, []
    reverted = {m.group(1) for text in messages if (m := re.search(r"[Rr]everted (\S+?):", text))}
    if not reverted:
        return False
    a.edits = [e for e in a.edits if e["path"] not in reverted]
    a.log({"type": "reverted_by_loop", "paths": sorted(reverted)})
    a.reminded.add("unique")  # whatever broke, the next edit should not hit another place of the file
    if not a.chance("redo", P_REDO):
        a.note("my change was reverted because tests failed; leaving it")
        return False
    a.note("my change was reverted because tests failed; trying the fix again")
    yield from refix(a)
    return True


def review(a: SimCoder) -> Step:
    """The loop did not take the submission: a reminder, a refusal or a revert came back."""
    yield from handle_messages(a)
    yield from process_notices(a)
    yield from check_repro(a)
    yield from test_and_repair(a)
    if a.pick(LINT) and a.told("style"):
        yield from lint_and_fix(a)

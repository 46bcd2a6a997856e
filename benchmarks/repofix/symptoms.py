"""Failure signatures read from a repofix trace: what the offline diagnosis reasons from.

Each symptom names the harness file where the trace's failure point lies; the list is most specific first and
its first entry gives the rollout's `failure_file`. Vocabulary (see the README): harness_error,
missing_tool:<capability>, time_limit, context_overflow, max_turns, site_not_found, edited_wrong_copy,
site_not_visible, edit_wrong_occurrence, syntax_error, overbroad_change, reverted_by_loop,
unrelated_failure_chased, collection_errors, tests_timed_out, test_output_lost, tests_edited, edge_case_missed,
incomplete_change, style_violation, submitted_failing, submitted_untested, unverified_fix.
"""

from __future__ import annotations

import re

from benchmarks.simkit import read_trace, symptoms_of

TYPE_CHECKING = False  # no `typing` / `saddler.benchmark` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

    from saddler.benchmark import Symptom

__all__ = ["extract", "extract_raw", "read_trace"]

Raw = tuple[str, str | None, str]  # (code, file, detail)
PROMPT = "prompts/system.md"
TESTS = "tools/tests.py"
EDIT_TOOLS = ("edit_file",)


def extract(events: list[dict[str, Any]]) -> list[Symptom]:
    """Symptoms of one failed episode, most specific first (the first one is the failure point)."""
    return symptoms_of(events, extract_raw(events))


def _is_test(path: str) -> bool:
    return "/tests/" in f"/{path}" or path.rsplit("/", 1)[-1].startswith("test_")


def extract_raw(events: list[dict[str, Any]]) -> list[Raw]:
    """`extract` as plain (code, file, detail) tuples."""
    head = next((e for e in events if e["type"] == "task"), None)
    grade = next((e for e in events if e["type"] == "grade"), None)
    if head is None or grade is None or grade.get("passed"):
        return []
    out: list[Raw] = []
    failed = dict(grade.get("failed", []))
    f2p_failed = [n for n in failed if n.startswith("f2p:")]

    def add(code: str, file: str | None, detail: str = "") -> None:
        if not any(s[0] == code for s in out):
            out.append((code, file, detail))

    ops = [e for e in events if e["type"] == "op"]
    runs = [e for e in ops if e["op"] == "run_tests"]
    edits = [e for e in events if e["type"] == "tool_call" and e["tool"] in EDIT_TOOLS]
    for e in events:  # what ended the episode first, then what it lacked
        kind = e["type"]
        if kind == "harness_error":
            add("harness_error", e.get("file"), e.get("message", "")[:200])
        elif kind == "stop" and e["reason"] == "time_limit":
            in_tests = sum(float(r.get("seconds", 0)) for r in runs)
            clock = float(grade.get("clock", 0)) or 1.0
            where = TESTS if in_tests > clock / 2 else "loop.py"
            add("time_limit", where, f"sandbox time limit; {in_tests:.0f}s of {clock:.0f}s in {len(runs)} test runs")
        elif kind == "stop" and e["reason"] in ("context_overflow", "max_turns"):
            add(e["reason"], "loop.py", "context window full" if e["reason"] == "context_overflow" else "turns spent")
    for e in events:
        if e["type"] == "no_tool":
            add(f"missing_tool:{e['capability']}", f"tools/{e['capability']}.py", f"no tool to {e['intent']}")
    located = {  # where the model looked and edited, most telling first
        "edited_wrong_copy": [e for e in ops if e["op"] == "replace" and e["args"]["path"].startswith("build/")],
        "site_not_found": [e for e in events if e["type"] == "not_located"],
        "site_not_visible": [e for e in events if e["type"] == "missing_in_output" and e.get("truncated")],
        "edit_wrong_occurrence": [e for e in ops if e["op"] == "replace" and e.get("occurrences", 0) > 1],
    }
    for e in located["edited_wrong_copy"][:1]:
        add("edited_wrong_copy", "tools/search.py", f"edited {e['args']['path']}, a build copy")
    shown = {f for e in ops if e["op"] == "grep" for f in e.get("files", [])}
    for e in edits:
        module = re.match(r"from ([\w.]+) import", str(e["args"].get("new", "")))
        if module is None:
            continue
        stale = f"build/lib/{module.group(1).replace('.', '/')}.py"
        if stale in shown and not any(f.endswith(stale[len("build/lib/") :]) and f != stale for f in shown):
            add("edited_wrong_copy", "tools/search.py", f"imported from {module.group(1)}, found only in {stale}")
    for e in located["site_not_found"][:1]:
        add("site_not_found", "tools/search.py", f"{e['what']} not among the {e['hits']} matches shown")
    for e in located["site_not_visible"][:1]:
        add("site_not_visible", "tools/files.py", f"{e['wanted'][:80]} cut from the output of {e['path']}")
    for e in located["edit_wrong_occurrence"][:1]:
        if set(failed) - {"style"}:
            add("edit_wrong_occurrence", "tools/edit.py", f"{e['args']['path']}: replaced the first of "
                f"{e['occurrences']} occurrences (lines {e.get('lines')})")  # fmt: skip
    if any("SyntaxError" in why or "IndentationError" in why for why in failed.values()):
        add("syntax_error", "tools/edit.py", "an edit left a module that does not compile")
    p2p_failed = [n for n in failed if n.startswith("p2p:")]
    if p2p_failed and any(str(e["args"].get("old", "")).lstrip().startswith("def ") for e in edits):
        add("overbroad_change", PROMPT, "a shared function's signature changed and other callers broke")
    for e in events:
        kind = e["type"]
        if kind == "reverted_by_loop":
            add("reverted_by_loop", "loop.py", f"the loop reverted {', '.join(e['paths'])} after a failing run")
        elif kind == "chase":
            add("unrelated_failure_chased", TESTS, e["why"][:200])
        elif kind == "op" and e["op"] == "run_tests" and "import file mismatch" in e.get("causes", {}).values():
            add("collection_errors", TESTS, "pytest could not collect test files that share a name")
        elif kind == "op" and e["op"] == "run_tests" and e.get("timed_out"):
            add("tests_timed_out", TESTS, "a test run was killed by the command timeout")
        elif kind == "failure_unseen":
            add("test_output_lost", "middleware/output.py", "the failing tests were cut from the test output")
    if f2p_failed and any(_is_test(str(e["args"].get("path", ""))) for e in edits):
        add("tests_edited", PROMPT, "a test was changed instead of the code it tests")
    if any(n.endswith("_none") and "only the reported case" in failed[n] for n in f2p_failed):
        add("edge_case_missed", PROMPT, "the reported case is handled, a related one is not")
    if head["family"] == "multi_file" and any("still there" in failed[n] for n in f2p_failed):
        add("incomplete_change", PROMPT, "a place that needed the same change was left out")
    if "style" in failed:
        formatted = any(e["op"] == "format" for e in ops)
        add("style_violation", "middleware/format.py" if formatted else PROMPT, failed["style"][:200])
    last_submit = max((i for i, e in enumerate(events) if e["type"] == "submit"), default=-1)
    tested = [i for i, e in enumerate(events) if e["type"] == "op" and e["op"] == "run_tests" and i < last_submit]
    edited = [i for i, e in enumerate(events) if e["type"] == "op" and e["op"] == "replace" and i < last_submit]
    if last_submit >= 0 and tested and (events[tested[-1]].get("failed") or events[tested[-1]].get("errors")):
        add("submitted_failing", "loop.py", "submitted after a test run that failed")
    elif last_submit >= 0 and edited and (not tested or tested[-1] < edited[-1]):
        add("submitted_untested", PROMPT, "submitted without running the tests after the last edit")
    sources = {e["args"]["path"] for e in ops if e["op"] == "replace"}
    wrong = [n for n in f2p_failed if "does not fix it" in failed[n] or "only the reported" in failed[n]]
    if wrong and sources and not any(e["op"] == "run_script" for e in ops):
        add("unverified_fix", PROMPT, "the change did not fix the issue and was never checked against a reproduction")
    return out

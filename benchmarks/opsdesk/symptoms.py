"""Failure signatures read from an opsdesk trace: what the offline diagnosis reasons from.

Each symptom names the harness file where the trace's failure point lies. Vocabulary (see README):
harness_error, missing_tool:<app>, transient_unretried, rate_limited, max_turns, pagination_truncated,
tz_naive, tz_mismatch, ambiguous_name_guess, long_output_lost, item_not_found, mail_bounced,
unexpected_mail, step_skipped, finished_unverified, verification_missed.
"""

from __future__ import annotations

import re

from benchmarks.opsdesk.world import GROUP_BY_ID
from benchmarks.simkit import read_trace, symptoms_of

__all__ = ["extract", "extract_raw", "read_trace"]

TYPE_CHECKING = False  # no `typing` / `saddler.benchmark` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

    from saddler.benchmark import Symptom


Raw = tuple[str, str | None, str]  # (code, file, detail)

PROMPT = "prompts/system.md"
ZONED = re.compile(r"(Z|[+-]\d\d:\d\d)$")


def extract(events: list[dict[str, Any]]) -> list[Symptom]:
    """Symptoms of one failed episode, most specific first (the first one is the failure point)."""
    return symptoms_of(events, extract_raw(events))


def extract_raw(events: list[dict[str, Any]]) -> list[Raw]:
    """`extract` as plain (code, file, detail) tuples."""
    head = next((e for e in events if e["type"] == "task"), None)
    grade = next((e for e in events if e["type"] == "grade"), None)
    if head is None or grade is None or grade.get("passed"):
        return []
    out: list[Raw] = []
    failed = {name for name, _ in grade.get("failed", [])}

    def add(code: str, file: str | None, detail: str = "") -> None:
        if not any(s[0] == code for s in out):
            out.append((code, file, detail))

    for e in events:
        if e["type"] == "harness_error":
            add("harness_error", e.get("file"), e.get("message", "")[:200])
        elif e["type"] == "no_tool":
            add(f"missing_tool:{e['capability']}", f"tools/{e['capability']}.py", f"no tool to {e['intent']}")
        elif e["type"] == "give_up" and e["code"] == "transient":
            add("transient_unretried", "loop.py", e["message"][:200])
        elif e["type"] == "give_up" and e["code"] in ("rate_limited", "locked_out", "retries_exhausted"):
            add("rate_limited", "loop.py", e["message"][:200])
        elif e["type"] == "stop" and e.get("reason") == "max_turns":
            add("max_turns", "loop.py", "turn budget spent before finishing")
    api = [e for e in events if e["type"] == "api"]
    fetched = {(e["op"], e["args"].get("page")) for e in api}
    for e in api:
        nxt = (e.get("result") or {}).get("next_page")
        if nxt and (e["op"], nxt) not in fetched:
            add("pagination_truncated", e.get("tool") or None, f"{e['op']} stopped at page {e['args'].get('page')}")
    offset = GROUP_BY_ID[head["group"]].offset_min
    if failed & {"event_time", "answer", "event_created"}:
        starts = [e["args"].get("start", "") for e in api if e["op"] == "calendar.create_event"]
        naive = any(not ZONED.search(s) for s in starts) or any(e["type"] == "tz_assumed" for e in events)
        calendar_file = next((e.get("tool") for e in api if e["op"].startswith("calendar.")), "tools/calendar.py")
        if offset and naive:
            add("tz_naive", calendar_file, f"times passed without a zone; user is UTC{offset / 60:+g}")
        elif "event_time" in failed and starts and all(ZONED.search(s) for s in starts):
            add("tz_mismatch", calendar_file, "zoned start time converted with the wrong offset")
    for e in events:
        if e["type"] == "missing_in_output":
            if e.get("truncated"):
                add("long_output_lost", "middleware/output.py", f"{e['wanted']} cut off by truncation")
            else:
                add("item_not_found", "tools/calendar.py", f"{e['wanted']} not in the tool output")
        elif e["type"] == "error_seen" and e["error"] == "not_found" and "bounced" in e.get("message", ""):
            add("mail_bounced", PROMPT, e["message"][:200])
    if failed & {"attendee", "total_sent", "confirmation"}:
        ambiguous = any(e["op"] == "contacts.search" and (e.get("result") or {}).get("total", 0) > 1 for e in api)
        if ambiguous:
            guessed = any(e["type"] == "guess" for e in events)
            add(
                "ambiguous_name_guess",
                PROMPT if guessed else "tools/contacts.py",
                "several contacts matched the name; the first was used",
            )
    if "quiet_policy" in failed:
        forced = [e for e in events if e["type"] == "tool_call" and e.get("forced")]
        add("unexpected_mail", forced[0].get("by") if forced else PROMPT, "mail sent against the user's policy")
    if not out and failed & {"confirmation", "all_notified"}:
        add("step_skipped", PROMPT, "a requested step was never done")
    if not out:
        verified = any(e["type"] == "verify" for e in events)
        add(
            "verification_missed" if verified else "finished_unverified",
            PROMPT,
            "a wrong value was committed" + (" despite a review" if verified else " and never re-checked"),
        )
    return out

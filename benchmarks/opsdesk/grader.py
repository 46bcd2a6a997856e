"""The oracle: grades the final app state and/or the answer of one episode, with a rationale on failure.

`grade(spec, env, answer)` returns a `Grade`: every check that applies to the task, the score (share of
checks passed), and the first failing check's rationale. A task passes only when every check passes.
"""

from __future__ import annotations

import re

from benchmarks.opsdesk.env import Env
from benchmarks.opsdesk.world import GROUP_BY_ID
from benchmarks.simmodel import Grade

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any


def _number(text: str) -> str | None:
    found = re.findall(r"-?\d[\d,]*(?:\.\d+)?", text or "")
    return found[-1].replace(",", "") if found else None


def _mails_to(env: Env, address: str) -> list[dict[str, Any]]:
    return [m for m in env.outbox if m["to"] == address]


def grade(spec: Any, env: Env, answer: str | None) -> Grade:
    """Check the end state and answer of `spec` (a TaskSpec) against its oracle parameters."""
    p, fam, g = spec.params, spec.family, Grade()
    answer = answer or ""
    expected_recipients: set[str] = set()
    if fam in ("count_events", "expense_total"):
        got = _number(answer)
        g.add("answer", got == p["answer"].replace(",", ""), f"answered {got!r}, expected {p['answer']}")
    elif fam == "meeting_time":
        times = re.findall(r"\b\d\d:\d\d\b", answer)
        g.add("answer", p["answer"] in times, f"answered {answer!r}, expected {p['answer']} local time")
    elif fam in ("schedule", "schedule_confirm"):
        events = [e for e in env.db_events if e["title"] == p["title"]]
        g.add("event_created", len(events) == 1, f"{len(events)} event(s) titled {p['title']!r}, expected 1")
        if len(events) == 1:
            ev = events[0]
            g.add(
                "event_time",
                ev["start"] == p["start_utc"],
                f"event starts {ev['start']}, expected {p['start_utc']} ({p['local_time']} local)",
            )
            g.add("attendee", p["email"] in ev["attendees"], f"invited {ev['attendees']}, expected {p['email']}")
        if p["confirm"]:
            expected_recipients.add(p["email"])
            ok = any(p["title"] in m["subject"] for m in _mails_to(env, p["email"]))
            g.add("confirmation", ok, f"no confirmation mail to {p['email']} mentioning {p['title']!r}")
    elif fam == "email_report":
        expected_recipients.add(p["email"])
        mails = _mails_to(env, p["email"])
        ok = any(f"${p['total']}" in m["body"] for m in mails)
        g.add("total_sent", ok, f"{len(mails)} mail(s) to {p['email']}, none with the total ${p['total']}")
    elif fam == "file_expense":
        new = [x for x in env.db_expenses if not str(x["id"]).startswith("h")]
        g.add("expense_filed", len(new) == 1, f"{len(new)} expense(s) filed, expected 1")
        if len(new) == 1:
            x, want = new[0], {k: p[k] for k in ("amount_cents", "currency", "category", "date")}
            bad = {k: x.get(k) for k in want if x.get(k) != want[k]}
            g.add("expense_fields", not bad, f"wrong fields {bad}, expected {want}")
    elif fam == "reply_latest":
        expected_recipients.add(p["email"])
        mails = _mails_to(env, p["email"])
        subjects = [m["subject"] for m in mails]
        g.add("reply", p["subject"] in subjects, f"replied with {subjects}, expected subject {p['subject']!r}")
    elif fam in ("bulk_notify", "bulk_small"):
        expected_recipients.update(p["emails"])
        missing = [e for e in p["emails"] if not any(p["message"] in m["body"] for m in _mails_to(env, e))]
        g.add("all_notified", not missing, f"{len(missing)} of {len(p['emails'])} not notified: {missing}")
    if GROUP_BY_ID[spec.group].quiet:
        extra = sorted({m["to"] for m in env.outbox} - expected_recipients)
        g.add("quiet_policy", not extra, f"policy forbids unrequested mail, but mailed {extra}")
    return g

"""How the simulated agent goes about each task family (part of the fixed model, not of the harness).

Each plan is a generator over `SimAgent` building blocks: it yields actions, reads results the way a
model reads text, records draft mistakes and the repairs a later review could make, and returns the
final answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta

from benchmarks.opsdesk.agent import P_TZ_SLIP, SKIP, GiveUp, SimAgent

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

    from benchmarks.opsdesk.agent import Step


WEEK_ARGS = {"start_date": "2026-03-09", "end_date": "2026-03-13"}


def _shift(stamp: str, minutes: int) -> str:
    zulu = stamp.endswith("Z")
    value = datetime.fromisoformat(stamp.rstrip("Z")[:16]) + timedelta(minutes=minutes)
    return value.strftime("%Y-%m-%dT%H:%M") + ("Z" if zulu else "")


def _offset(a: SimAgent) -> Step:
    if "offset" not in a.facts:
        prof = yield from a.use("get profile time zone", {})
        a.facts["offset"] = int((prof or {}).get("utc_offset_minutes", 0)) if isinstance(prof, dict) else 0
    return a.facts["offset"]


def _start_arg(a: SimAgent, date: str, hhmm: str) -> Step:
    """The start time the model passes: naive local time, or its own UTC conversion when told about zones."""
    naive = f"{date}T{hhmm}"
    if "local_time" not in a.directives:
        return naive
    off = yield from _offset(a)
    utc = _shift(naive, -off) + "Z"
    if a.mistake("tz_slip", P_TZ_SLIP):
        utc = _shift(utc, 60)
    return utc


def _local_hhmm(a: SimAgent, start: str) -> Step:
    if re.search(r"[+-]\d\d:\d\d$", start):
        return start[11:16]
    if "local_time" not in a.directives:
        a._log({"type": "tz_assumed", "value": start, "note": "reported the time as shown"})
        return start[11:16]
    off = yield from _offset(a)
    local = _shift(start.rstrip("Z"), off)
    if a.mistake("tz_slip", P_TZ_SLIP):
        local = _shift(local, 60)
    return local[11:16]


def count_events(a: SimAgent) -> Step:
    events = yield from a.use("list calendar events", dict(WEEK_ARGS))
    n = len(events) if isinstance(events, list) else 0
    if a.precheck("count_events"):

        def recount() -> Step:
            again = yield from a.use("list calendar events", dict(WEEK_ARGS))
            a.facts["answer"] = str(len(again) if isinstance(again, list) else 0)

        a.fixups.append(("miscounted the events", recount))
        return str(n + 1)
    return str(n)


def meeting_time(a: SimAgent) -> Step:
    p = a.spec.params
    events = yield from a.use("list calendar events", {"start_date": p["date"], "end_date": p["date"]})
    hits = [e for e in events or [] if isinstance(e, dict) and e.get("title") == p["title"]]
    if not hits:
        a._log({"type": "missing_in_output", "wanted": p["title"], "truncated": False})
        return "not found"
    hhmm = yield from _local_hhmm(a, str(hits[0]["start"]))
    if a.precheck("meeting_time"):
        a.fixups.append(("misread the time", _set_answer(a, hhmm)))
        return _shift(f"2026-01-01T{hhmm}", 30)[11:16]
    return hhmm


def _set_answer(a: SimAgent, value: str) -> Callable[[], Step]:
    def repair() -> Step:
        a.facts["answer"] = value
        yield from ()

    return repair


def schedule(a: SimAgent) -> Step:
    p = a.spec.params
    email = yield from a.find_contact(p["search"], p["hint"])
    start = yield from _start_arg(a, p["local_date"], p["local_time"])
    intended = start
    if a.precheck(a.spec.family):
        start = _shift(start, 60)
    created = yield from a.use(
        "create calendar event", {"title": p["title"], "start": start, "minutes": 30, "attendees": [email]}
    )
    if start != intended and isinstance(created, dict):

        def move() -> Step:
            yield from a.use("list calendar events", {"start_date": p["local_date"], "end_date": p["local_date"]})
            yield from a.use("update move calendar event", {"event_id": created.get("id"), "start": intended})

        a.fixups.append(("event at the wrong time", move))
    if p["confirm"]:

        def confirm() -> Step:
            yield from a.use(
                "send email",
                {
                    "to": email,
                    "subject": f"Confirmed: {p['title']}",
                    "body": f"Confirming '{p['title']}' on {p['local_date']}.",
                },
            )

        if a.mistake("skip", SKIP["schedule_confirm"]):
            a.fixups.append(("confirmation not sent", confirm))
        else:
            yield from confirm()
    return "Scheduled."


def email_report(a: SimAgent) -> Step:
    p = a.spec.params
    text = yield from a.use("read file", {"path": p["path"]})
    text = text if isinstance(text, str) else ""
    found = re.search(r"TOTAL: \$([\d,]+\.\d\d)", text)
    if found:
        total = found.group(1)
    else:
        subs = re.findall(r"Subtotal[^$]*\$([\d,]+\.\d\d)", text)
        a._log({"type": "missing_in_output", "wanted": "TOTAL line", "truncated": "[truncated" in text})
        total = subs[-1] if subs else "0.00"
    true_total = total
    if a.precheck("email_report"):
        total = total[::-1] if len(set(total)) > 1 else total + "0"
    email = yield from a.find_contact(p["search"], p["hint"])
    yield from a.use(
        "send email",
        {
            "to": email,
            "subject": f"Grand total from {p['path']}",
            "body": f"The grand total in {p['path']} is ${total}.",
        },
    )
    if total != true_total:

        def correct() -> Step:
            yield from a.use(
                "send email",
                {
                    "to": email,
                    "subject": f"Correction: grand total from {p['path']}",
                    "body": f"Correction: the grand total in {p['path']} is ${true_total}.",
                },
            )

        a.fixups.append(("sent a wrong total", correct))
    return "Sent."


def file_expense(a: SimAgent) -> Step:
    text = yield from a.use("read file", {"path": a.spec.params["path"]})
    text = text if isinstance(text, str) else ""
    fields = dict(re.findall(r"^(\w+): (.+)$", text, re.M))
    if "Amount" not in fields:
        raise GiveUp("not_found", "the receipt shows no amount")
    amount = true_amount = fields["Amount"]
    if a.precheck("file_expense"):
        whole, cents = amount.split(".")
        amount = f"{whole[::-1].lstrip('0') or '0'}.{cents[::-1]}" if len(set(amount)) > 2 else amount + "1"
    item = yield from a.use(
        "submit expense",
        {
            "amount": amount,
            "currency": fields.get("Currency", ""),
            "category": fields.get("Category", ""),
            "date": fields.get("Date", ""),
        },
    )
    if amount != true_amount and isinstance(item, dict):

        def fix() -> Step:
            yield from a.use("update expense amount", {"expense_id": item.get("id"), "amount": true_amount})

        a.fixups.append(("expense filed with the wrong amount", fix))
    return "Filed."


def expense_total(a: SimAgent) -> Step:
    category = a.spec.params["category"]

    def add_up() -> Step:
        items = yield from a.use("list expenses month", {"month": "2026-02"})
        cents = 0
        for x in items if isinstance(items, list) else []:
            if isinstance(x, dict) and x.get("category") == category:
                cents += round(float(x.get("amount", 0)) * 100)
        return f"{cents / 100:.2f}"

    total = yield from add_up()
    if a.precheck("expense_total"):

        def redo() -> Step:
            a.facts["answer"] = yield from add_up()

        a.fixups.append(("added the amounts up wrong", redo))
        return f"{float(total) + 10:.2f}"
    return str(total)


def reply_latest(a: SimAgent) -> Step:
    p = a.spec.params
    msgs = yield from a.use("search inbox emails from sender", {"sender": p["sender"]})
    msgs = [m for m in msgs or [] if isinstance(m, dict)]
    if not msgs:
        raise GiveUp("not_found", f"no mail from {p['sender']}")
    ordered = sorted(msgs, key=lambda m: m.get("date", ""))
    chosen = ordered[-2] if a.precheck("reply_latest") and len(ordered) > 1 else ordered[-1]
    yield from a.use(
        "send email", {"to": chosen["from"], "subject": "Re: " + chosen["subject"], "body": "Thanks, noted."}
    )
    return "Replied."


def bulk(a: SimAgent) -> Step:
    p = a.spec.params
    for name in p["names"]:

        def send(name: str = name) -> Step:
            email = yield from a.find_contact(name, "")
            yield from a.use("send email", {"to": email, "subject": "Update", "body": f"Hi, {p['message']}."})

        if a.mistake("skip", SKIP[a.spec.family]):
            a.fixups.append((f"{name} was not emailed", send))
            continue
        yield from send()
    return "Sent."


PLANS: dict[str, Callable[[SimAgent], Step]] = {
    "count_events": count_events,
    "meeting_time": meeting_time,
    "schedule": schedule,
    "schedule_confirm": schedule,
    "email_report": email_report,
    "file_expense": file_expense,
    "expense_total": expense_total,
    "reply_latest": reply_latest,
    "bulk_notify": bulk,
    "bulk_small": bulk,
}


def plan_for(family: str) -> Callable[[SimAgent], Any]:
    return PLANS[family]

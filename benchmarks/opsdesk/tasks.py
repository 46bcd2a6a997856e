"""The 120 opsdesk scenarios: ten per group, generated deterministically, each with its oracle expectations.

Families: count_events, meeting_time, schedule, schedule_confirm, email_report, file_expense,
expense_total, reply_latest, bulk_notify (six recipients), bulk_small (three recipients).
"""

from __future__ import annotations

import random
from functools import cache

from benchmarks.opsdesk.world import GROUP_BY_ID, GROUPS, Group
from benchmarks.opsdesk.world_data import TOPICS, WEEK, build_data, utc_of_local
from benchmarks.simmodel import TaskSpec

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any


WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MESSAGES = [
    "the review moved to Thursday 3pm",
    "the office is closed on Friday",
    "the offsite agenda is ready",
    "badges must be renewed this week",
]


def _header(g: Group) -> str:
    policy = " Policy: never email anyone unless the task explicitly asks for it." if g.quiet else ""
    return f"[{g.persona}, {g.company}, {g.city}; company mail domain {g.domain}.{policy}] "


def _ref(g: Group, c: dict[str, Any]) -> tuple[str, str, str]:
    """(how the task names the person, what to search for, the disambiguating hint)."""
    first = c["name"].split()[0]
    if g.ambiguous:
        return f"{first} from {c['department']}", first, c["department"]
    return c["name"], c["name"], ""


def _report(rng: random.Random, long: bool) -> tuple[str, str]:
    lines, total = ["QUARTERLY COST REPORT", "=" * 21], 0
    for k in range(1, (72 if long else 12) + 1):
        cents = rng.randint(1000, 90000)
        total += cents
        lines.append(f"Item {k:02d}: {rng.choice(TOPICS):<16} ${cents / 100:>9,.2f}")
        if k % 10 == 0:
            lines.append(f"Subtotal through item {k}: ${total / 100:,.2f}")
    amount = f"{total / 100:,.2f}"
    lines.append(f"TOTAL: ${amount}")
    return "\n".join(lines) + "\n", amount


def _make(g: Group, family: str, i: int, data: dict[str, Any], rng: random.Random) -> tuple[str, dict[str, Any]]:
    contacts = data["contacts"]
    target = rng.choice(contacts[:5]) if g.ambiguous else rng.choice(contacts[:12])
    ref, search, hint = _ref(g, target)
    if family == "count_events":
        return (
            "How many meetings are on my calendar this week (Monday 9 to Friday 13 March 2026)? Answer with a number.",
            {"answer": str(len(data["events"]))},
        )
    if family == "meeting_time":
        event = rng.choice(data["events"])
        local = _to_local(event["start"], g.offset_min)
        day = WEEK[[d.strftime("%Y-%m-%d") for d in WEEK].index(local[:10])]
        return (
            f"At what local time (HH:MM, my time zone) does my '{event['title']}' meeting start on "
            f"{WEEKDAYS[day.weekday()]} {day.day} March?",
            {"answer": local[11:16], "title": event["title"], "date": local[:10]},
        )
    if family in ("schedule", "schedule_confirm"):
        day = rng.choice(WEEK)
        hhmm = f"{rng.choice([9, 10, 11, 14, 15, 16]):02d}:{rng.choice(['00', '30'])}"
        title = f"{rng.choice(TOPICS)} follow-up {i}"
        text = (
            f"Schedule a 30-minute meeting titled '{title}' with {ref} on {WEEKDAYS[day.weekday()]} "
            f"{day.day} March at {hhmm} (my local time)."
        )
        confirm = family == "schedule_confirm"
        if confirm:
            text += f" Then email {ref} to confirm."
        start = utc_of_local(day, hhmm, g.offset_min).strftime("%Y-%m-%dT%H:%MZ")
        return text, {
            "title": title,
            "email": target["email"],
            "search": search,
            "hint": hint,
            "local_date": day.strftime("%Y-%m-%d"),
            "local_time": hhmm,
            "start_utc": start,
            "confirm": confirm,
        }
    if family == "email_report":
        path = f"reports/q{i}-{rng.choice(['ops', 'travel', 'vendors', 'cloud'])}.txt"
        body, total = _report(rng, g.long_reports)
        data["files"][path] = body
        return (
            f"Email {ref} the grand total from {path}.",
            {"path": path, "email": target["email"], "search": search, "hint": hint, "total": total},
        )
    if family == "file_expense":
        path = f"receipts/r{i}.txt"
        cents = rng.randint(1200, 48000)
        category, currency = rng.choice(["taxi", "meals", "hotel", "software"]), rng.choice(["USD", "EUR", "GBP"])
        date = f"2026-03-{rng.randint(1, 8):02d}"
        data["files"][path] = (
            f"RECEIPT\nVendor: {rng.choice(['Metro Cabs', 'Blue Fork', 'Inn 9', 'CloudDesk'])}\n"
            f"Date: {date}\nAmount: {cents / 100:.2f}\nCurrency: {currency}\nCategory: {category}\n"
        )
        return (
            f"File an expense for the receipt in {path}.",
            {"path": path, "amount_cents": cents, "currency": currency, "category": category, "date": date},
        )
    if family == "expense_total":
        category = rng.choice(["taxi", "meals", "hotel", "travel"])
        total = sum(x["amount_cents"] for x in data["expenses"] if x["category"] == category)
        return (
            f"How much did I spend on {category} in February 2026? Answer with the amount, e.g. 123.45.",
            {"answer": f"{total / 100:.2f}", "category": category},
        )
    if family == "reply_latest":
        sender = rng.choice(contacts[5:12])
        mails = sorted((m for m in data["inbox"] if m["from"] == sender["email"]), key=lambda m: m["date"])
        return (
            f"Reply to the latest email from {sender['name']} with 'Thanks, noted.'",
            {"sender": sender["name"], "email": sender["email"], "subject": "Re: " + mails[-1]["subject"]},
        )
    if family in ("bulk_notify", "bulk_small"):
        people = rng.sample(contacts[5:16], 6 if family == "bulk_notify" else 3)
        msg = rng.choice(MESSAGES)
        names = ", ".join(p["name"] for p in people)
        return (
            f"Email each of these colleagues individually that {msg}: {names}.",
            {"emails": [p["email"] for p in people], "names": [p["name"] for p in people], "message": msg},
        )
    raise ValueError(f"unknown family {family}")


def _to_local(start_utc: str, offset_min: int) -> str:
    from datetime import datetime, timedelta

    value = datetime.fromisoformat(start_utc.rstrip("Z")) + timedelta(minutes=offset_min)
    return value.strftime("%Y-%m-%dT%H:%M")


@cache
def group_world(group_id: str) -> tuple[dict[str, Any], tuple[TaskSpec, ...]]:
    """The group's data (including every task's files) and its task specs, in a fixed order."""
    g = GROUP_BY_ID[group_id]
    data = build_data(g)
    rng = random.Random(f"opsdesk|{g.id}|tasks")
    specs, i = [], 0
    for family, count in g.families:
        for _ in range(count):
            i += 1
            prompt, params = _make(g, family, i, data, rng)
            specs.append(
                TaskSpec(
                    id=f"{g.id}-{i:02d}",
                    group=g.id,
                    split=g.split,
                    family=family,
                    prompt=_header(g) + prompt,
                    params=params,
                )
            )
    return data, tuple(specs)


def all_specs() -> list[TaskSpec]:
    return [s for g in GROUPS for s in group_world(g.id)[1]]


def spec_by_id(task_id: str) -> TaskSpec:
    """The spec of `task_id`; KeyError for an unknown id."""
    group_id = task_id.rsplit("-", 1)[0]
    if group_id not in GROUP_BY_ID:
        raise KeyError(task_id)
    for spec in group_world(group_id)[1]:
        if spec.id == task_id:
            return spec
    raise KeyError(task_id)

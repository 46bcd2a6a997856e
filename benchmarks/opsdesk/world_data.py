"""The generated data of an opsdesk universe (contacts, calendar, inbox, expenses) and the pools it is drawn from.

Contract: `build_data(group)` returns the group's full universe (`profile`, `contacts`, `events`, `inbox`, `files`,
empty until tasks add theirs, and `expenses`), drawn in a fixed order from `random.Random(f"opsdesk|{id}|data")`:
the same group always gives the same data. The name pools, `TOPICS` and `WEEK` (the week the tasks are set in),
`email_for` (an address in the group's style) and `utc_of_local` (a local time on a day, as UTC) serve the tasks too.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

    from benchmarks.opsdesk.world import Group


WEEK = [datetime(2026, 3, d) for d in range(9, 14)]  # Mon 9 .. Fri 13 March 2026
FIRST = [
    "Ana",
    "Ben",
    "Chloe",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Kenji",
    "Lena",
    "Marco",
    "Nora",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Uma",
    "Victor",
    "Wen",
    "Yara",
]
LAST = [
    "Silva",
    "Okafor",
    "Martin",
    "Patel",
    "Novak",
    "Haddad",
    "Kim",
    "Laurent",
    "Moreau",
    "Berg",
    "Sato",
    "Fischer",
    "Rossi",
    "Walsh",
    "Nasser",
    "Iyer",
    "Reed",
    "Costa",
    "Lund",
    "Shah",
    "Ito",
    "Mendes",
]
DEPTS = ["Finance", "Legal", "Design", "Sales", "Ops", "Research"]
TOPICS = [
    "Budget review",
    "Design sync",
    "Vendor call",
    "Roadmap",
    "Hiring panel",
    "Customer demo",
    "Retro",
    "Planning",
    "Security review",
    "Board prep",
    "Launch check",
    "Pricing",
    "Offsite prep",
    "Audit",
]


def email_for(first: str, last: str, style: str, domain: str) -> str:
    local = {"first.last": f"{first}.{last}", "flast": f"{first[0]}{last}", "first": first}[style]
    return f"{local.lower()}@{domain}"


def utc_of_local(day: datetime, hhmm: str, offset_min: int) -> datetime:
    hour, minute = (int(x) for x in hhmm.split(":"))
    local = day.replace(hour=hour, minute=minute, tzinfo=UTC)
    return local - timedelta(minutes=offset_min)


def _contacts(g: Group, rng: random.Random) -> list[dict[str, Any]]:
    firsts, lasts = rng.sample(FIRST, 16), rng.sample(LAST, 16)
    people = list(zip(firsts, lasts, strict=True))
    if g.ambiguous:  # three people share the first name of person 0, two that of person 1
        people[2], people[3], people[4] = (
            (people[0][0], people[2][1]),
            (people[0][0], people[3][1]),
            (people[1][0], people[4][1]),
        )
    out = []
    for i, (first, last) in enumerate(people):
        out.append(
            {
                "name": f"{first} {last}",
                "email": email_for(first, last, g.email_style, g.domain),
                "department": DEPTS[i % len(DEPTS)],
            }
        )
    return out


def _events(g: Group, rng: random.Random, contacts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    count = rng.randint(9, 12) if g.dense else rng.randint(3, 5)
    topics = rng.sample(TOPICS, count)
    events = []
    for i, topic in enumerate(topics):
        day = WEEK[i % 5]
        hhmm = f"{rng.choice([9, 10, 11, 13, 14, 15, 16, 17]):02d}:{rng.choice([0, 30]):02d}"
        who = rng.choice(contacts)
        events.append(
            {
                "id": f"e{i + 1}",
                "title": topic,
                "start": utc_of_local(day, hhmm, g.offset_min).strftime("%Y-%m-%dT%H:%MZ"),
                "minutes": 30,
                "attendees": [who["email"]],
            }
        )
    return events


def _inbox(g: Group, rng: random.Random, contacts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    mails = []
    for c in contacts[5:12]:
        n = rng.randint(7, 9) if g.big_inbox else rng.randint(2, 4)
        days = sorted(rng.sample(range(1, 60), n))
        for k, d in enumerate(days):
            date = (datetime(2026, 1, 10) + timedelta(days=d, hours=rng.randint(8, 18))).strftime("%Y-%m-%dT%H:%MZ")
            mails.append(
                {
                    "from": c["email"],
                    "from_name": c["name"],
                    "date": date,
                    "subject": f"{rng.choice(TOPICS)} notes #{k + 1}",
                    "body": "See attached notes.",
                }
            )
    return mails


def _expenses(g: Group, rng: random.Random) -> list[dict[str, Any]]:
    n = rng.randint(14, 19) if "expense_total" in dict(g.families) else rng.randint(4, 8)
    out = []
    for i in range(n):
        out.append(
            {
                "id": f"h{i + 1}",
                "amount_cents": rng.randint(800, 25000),
                "currency": "USD",
                "category": rng.choice(["taxi", "meals", "hotel", "travel"]),
                "date": f"2026-02-{rng.randint(1, 28):02d}",
            }
        )
    return out


def build_data(g: Group) -> dict[str, Any]:
    """The group's full universe (tasks add their files to `files`)."""
    rng = random.Random(f"opsdesk|{g.id}|data")
    contacts = _contacts(g, rng)
    profile = {
        "name": g.persona,
        "company": g.company,
        "domain": g.domain,
        "city": g.city,
        "utc_offset_minutes": g.offset_min,
        "policy": "never email anyone unless asked" if g.quiet else "",
    }
    return {
        "profile": profile,
        "contacts": contacts,
        "events": _events(g, rng, contacts),
        "inbox": _inbox(g, rng, contacts),
        "files": {},
        "expenses": _expenses(g, rng),
    }

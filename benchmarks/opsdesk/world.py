"""The twelve universes (groups) of opsdesk: persona, time zone, data, API strictness and task mix.

A group is its own world, like a GAIA2 universe. Splits are held out by group: four train, four dev,
four test groups. All data is generated deterministically from the group id.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any


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


class Group:
    """One universe. `families` lists (family, count) in task order."""

    __slots__ = (
        "ambiguous",
        "big_inbox",
        "city",
        "company",
        "dense",
        "email_style",
        "families",
        "id",
        "long_reports",
        "offset_min",
        "persona",
        "quiet",
        "send_limit",
        "split",
        "transient",
    )

    def __init__(
        self,
        id: str,
        split: str,
        persona: str,
        company: str,
        city: str,
        offset_min: int,
        email_style: str,
        transient: float,
        send_limit: int,
        dense: bool,
        ambiguous: bool,
        long_reports: bool,
        big_inbox: bool,
        quiet: bool,
        families: tuple[tuple[str, int], ...],
    ) -> None:
        self.id, self.split, self.persona, self.company, self.city = id, split, persona, company, city
        self.offset_min = offset_min  # user's UTC offset in minutes
        self.email_style = email_style  # first.last | flast | first
        self.transient = transient  # per raw call
        self.send_limit = send_limit  # mails per 60 s before 429
        self.dense = dense  # calendar spills over several pages
        self.ambiguous = ambiguous  # several contacts share first names; tasks name people by first name + team
        self.long_reports = long_reports  # report files longer than the baseline output limit
        self.big_inbox = big_inbox  # many mails per sender: the latest sits beyond page 1
        self.quiet = quiet  # persona: never email anyone unless the task says so
        self.families = families

    @property
    def domain(self) -> str:
        return self.company.lower().replace(" ", "") + ".example"


def _g(
    gid: str,
    split: str,
    persona: str,
    city: str,
    off: int,
    style: str,
    transient: float,
    limit: int,
    flags: str,
    families: str,
) -> Group:
    fam = tuple((f.split(":")[0], int(f.split(":")[1])) for f in families.split())
    return Group(
        gid,
        split,
        persona,
        gid.capitalize(),
        city,
        off,
        style,
        transient,
        limit,
        "D" in flags,
        "A" in flags,
        "L" in flags,
        "I" in flags,
        "Q" in flags,
        fam,
    )


GROUPS: tuple[Group, ...] = (
    _g(
        "northwind",
        "train",
        "Dana Reyes",
        "New York",
        -300,
        "first.last",
        0.15,
        10,
        "DA",
        "count_events:2 meeting_time:1 schedule_confirm:3 bulk_notify:2 email_report:1 reply_latest:1",
    ),
    _g(
        "harborline",
        "train",
        "Luis Ortega",
        "New York",
        -300,
        "first.last",
        0.12,
        10,
        "L",
        "file_expense:3 expense_total:2 schedule:2 email_report:2 bulk_notify:1",
    ),
    _g(
        "atlas",
        "train",
        "Maya Brooks",
        "London",
        0,
        "first.last",
        0.2,
        10,
        "LI",
        "reply_latest:3 email_report:3 count_events:2 schedule_confirm:2",
    ),
    _g(
        "sakura",
        "train",
        "Aiko Mori",
        "Tokyo",
        540,
        "first.last",
        0.06,
        10,
        "AD",
        "schedule_confirm:3 meeting_time:3 bulk_notify:2 file_expense:2",
    ),
    _g(
        "brightwater",
        "dev",
        "Jonas Weber",
        "Dublin",
        0,
        "flast",
        0.05,
        2,
        "Q",
        "schedule:3 bulk_small:3 count_events:2 reply_latest:2",
    ),
    _g(
        "meridian",
        "dev",
        "Olivia Hart",
        "London",
        0,
        "first.last",
        0.12,
        10,
        "DL",
        "count_events:2 meeting_time:2 email_report:2 file_expense:2 expense_total:2",
    ),
    _g(
        "copperfield",
        "dev",
        "Sam Porter",
        "Chicago",
        -360,
        "first.last",
        0.1,
        10,
        "AI",
        "schedule_confirm:3 reply_latest:3 bulk_notify:2 meeting_time:2",
    ),
    _g(
        "lagoa",
        "dev",
        "Beatriz Lima",
        "Sao Paulo",
        -180,
        "first",
        0.05,
        2,
        "Q",
        "schedule:3 bulk_small:2 file_expense:3 email_report:2",
    ),
    _g(
        "greyfield",
        "test",
        "Tom Archer",
        "London",
        0,
        "flast",
        0.05,
        2,
        "QD",
        "schedule:3 bulk_small:3 count_events:2 meeting_time:2",
    ),
    _g(
        "kestrel",
        "test",
        "Rita Sousa",
        "Lisbon",
        0,
        "first.last",
        0.15,
        10,
        "DI",
        "count_events:2 reply_latest:3 meeting_time:2 email_report:3",
    ),
    _g(
        "orchid",
        "test",
        "Arjun Rao",
        "Mumbai",
        330,
        "first.last",
        0.08,
        10,
        "AL",
        "schedule_confirm:2 email_report:2 file_expense:1 reply_latest:3 count_events:2",
    ),
    _g(
        "tundra",
        "test",
        "Erin Cole",
        "Denver",
        -420,
        "flast",
        0.1,
        10,
        "",
        "file_expense:2 expense_total:1 bulk_small:2 count_events:2 reply_latest:3",
    ),
)
GROUP_BY_ID = {g.id: g for g in GROUPS}


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

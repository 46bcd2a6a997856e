"""The twelve universes (groups) of opsdesk: persona, time zone, data traits, API strictness and task mix.

A group is its own world, like a GAIA2 universe. Splits are held out by group: four train, four dev,
four test groups. A group's data is generated deterministically from its id (`benchmarks.opsdesk.world_data`).
"""

from __future__ import annotations


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

"""The simulated apps (never editable by a harness patch): calendar, contacts, mail, files, expenses, profile.

Raw APIs have realistic quirks: pagination (calendar, mail, expenses), naive timestamps read as UTC,
ambiguous name search, long file bodies, seeded transient errors, a send rate limit with lock-out, and
amounts in cents. Every raw call advances the simulated clock and is logged to the trace as an `api`
event, attributed to the harness tool that made it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any


PAGE_SIZE = 5
EXPENSE_PAGE = 10
CATEGORIES = ("taxi", "meals", "hotel", "travel", "software", "office")


class ApiError(Exception):
    """A raw API refusal; `kind` names it for traces and symptoms."""

    kind = "api_error"


class TransientError(ApiError):
    kind = "transient"


class RateLimited(ApiError):
    kind = "rate_limited"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LockedOut(ApiError):
    kind = "locked_out"


class NotFound(ApiError):
    kind = "not_found"


class InvalidRequest(ApiError):
    kind = "invalid"


def parse_instant(text: str) -> datetime:
    """ISO time; a naive value is read as UTC (the quirk the baseline harness falls into)."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def iso_utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")


class Env:
    """All apps of one task's universe, with the seeded fault model and the simulated clock."""

    def __init__(
        self,
        data: dict[str, Any],
        *,
        transient: float,
        send_limit: int,
        rng_key: str,
        log: Callable[[dict[str, Any]], None],
    ) -> None:
        self.profile: dict[str, Any] = dict(data["profile"])
        self.db_contacts: list[dict[str, Any]] = [dict(c) for c in data["contacts"]]
        self.db_events: list[dict[str, Any]] = [dict(e) for e in data["events"]]
        self.db_inbox: list[dict[str, Any]] = [dict(m) for m in data["inbox"]]
        self.db_files: dict[str, str] = dict(data["files"])
        self.db_expenses: list[dict[str, Any]] = [dict(x) for x in data["expenses"]]
        self.outbox: list[dict[str, Any]] = []
        self.transient, self.send_limit, self._key, self._log = transient, send_limit, rng_key, log
        self.clock = 0.0
        self.tool = ""  # the harness tool currently calling, for attribution
        self._calls = 0
        self._send_times: list[float] = []
        self._violations = 0
        self.calendar, self.contacts, self.mail = Calendar(self), Contacts(self), Mail(self)
        self.files, self.expenses = Files(self), Expenses(self)

    def get_profile(self) -> dict[str, Any]:
        """The user's profile: name, company, domain, tz name and UTC offset in minutes."""
        return dict(self.call("profile.get", {}, lambda: dict(self.profile), flaky=False))

    def sleep(self, seconds: float) -> None:
        """Advance the simulated clock (a real harness would time.sleep)."""
        self.clock += max(0.0, float(seconds))
        self._log({"type": "sleep", "seconds": seconds, "clock": self.clock})

    def call(self, op: str, args: dict[str, Any], fn: Callable[[], Any], *, flaky: bool = True) -> Any:
        """Run one raw API operation with the fault model; log it; raise ApiError on refusal."""
        self._calls += 1
        self.clock += 1.0
        event: dict[str, Any] = {"type": "api", "op": op, "args": args, "tool": self.tool, "clock": self.clock}
        draw = random.Random(f"{self._key}|api|{op}|{self._calls}").random()
        try:
            if flaky and draw < self.transient:
                raise TransientError(f"{op}: 503 Service Unavailable (temporary, try again)")
            out = fn()
        except ApiError as exc:
            event.update(error=exc.kind, message=str(exc))
            self._log(event)
            raise
        if isinstance(out, dict):
            event["result"] = {k: out[k] for k in ("next_page", "total", "page") if k in out}
        self._log(event)
        return out

    def check_send_rate(self) -> None:
        if self._violations >= 3:
            raise LockedOut("mail: account locked after repeated rate-limit violations; sending disabled")
        recent = [t for t in self._send_times if self.clock - t < 60.0]
        if len(recent) >= self.send_limit:
            self._violations += 1
            retry = int(60.0 - (self.clock - recent[0])) + 1
            raise RateLimited(f"mail: 429 Too Many Requests, retry after {retry}s", retry)
        self._send_times.append(self.clock)


class Calendar:
    """Events stored in UTC; listing is paginated and filters on UTC instants."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def list_events(self, start: str, end: str, page: int = 1) -> dict[str, Any]:
        """Events with start in [start, end]; a bare date means that UTC day (end date inclusive)."""

        def run() -> dict[str, Any]:
            lo = parse_instant(start)
            hi = parse_instant(end) + (timedelta(days=1) if len(end) == 10 else timedelta(0))
            hits = sorted(
                (e for e in self.env.db_events if lo <= parse_instant(e["start"]) < hi), key=lambda e: e["start"]
            )
            chunk = hits[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
            more = page * PAGE_SIZE < len(hits)
            return {"events": [dict(e) for e in chunk], "page": page, "next_page": page + 1 if more else None}

        return self.env.call("calendar.list_events", {"start": start, "end": end, "page": page}, run)

    def create_event(self, title: str, start: str, minutes: int, attendees: list[str]) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            event = {
                "id": f"ev{len(self.env.db_events) + 1}",
                "title": title,
                "start": iso_utc(parse_instant(start)),
                "minutes": int(minutes),
                "attendees": list(attendees),
            }
            self.env.db_events.append(event)
            return dict(event)

        return self.env.call("calendar.create_event", {"title": title, "start": start, "attendees": attendees}, run)

    def update_event(self, event_id: str, start: str) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            for event in self.env.db_events:
                if event["id"] == event_id:
                    event["start"] = iso_utc(parse_instant(start))
                    return dict(event)
            raise NotFound(f"calendar: no event {event_id}")

        return self.env.call("calendar.update_event", {"event_id": event_id, "start": start}, run)


class Contacts:
    def __init__(self, env: Env) -> None:
        self.env = env

    def search(self, name: str) -> dict[str, Any]:
        """Every contact whose full name contains `name` (case-insensitive), sorted by last name."""

        def run() -> dict[str, Any]:
            hits = [c for c in self.env.db_contacts if name.lower() in c["name"].lower()]
            hits.sort(key=lambda c: c["name"].split()[-1])
            return {"matches": [dict(c) for c in hits], "total": len(hits)}

        return self.env.call("contacts.search", {"name": name}, run)


class Mail:
    def __init__(self, env: Env) -> None:
        self.env = env

    def search(self, sender: str, page: int = 1) -> dict[str, Any]:
        """Mails whose sender name or address contains `sender`, OLDEST first, paginated."""

        def run() -> dict[str, Any]:
            hits = sorted(
                (m for m in self.env.db_inbox if sender.lower() in (m["from_name"] + m["from"]).lower()),
                key=lambda m: m["date"],
            )
            chunk = hits[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
            more = page * PAGE_SIZE < len(hits)
            return {"messages": [dict(m) for m in chunk], "page": page, "next_page": page + 1 if more else None}

        return self.env.call("mail.search", {"sender": sender, "page": page}, run)

    def send(self, to: str, subject: str, body: str) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            self.env.check_send_rate()
            known = {c["email"] for c in self.env.db_contacts} | {m["from"] for m in self.env.db_inbox}
            if to not in known:
                raise NotFound(f"mail: 550 recipient {to} does not exist (bounced)")
            msg = {"to": to, "subject": subject, "body": body, "clock": self.env.clock}
            self.env.outbox.append(msg)
            return {"status": "sent", "id": f"m{len(self.env.outbox)}"}

        return self.env.call("mail.send", {"to": to, "subject": subject}, run)


class Files:
    def __init__(self, env: Env) -> None:
        self.env = env

    def read(self, path: str) -> str:
        def run() -> str:
            if path not in self.env.db_files:
                raise NotFound(f"files: {path} not found")
            return self.env.db_files[path]

        return str(self.env.call("files.read", {"path": path}, run))


class Expenses:
    """Amounts are integer cents; listing is paginated by month (YYYY-MM)."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def submit(self, amount_cents: int, currency: str, category: str, date: str) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            if not isinstance(amount_cents, int):
                raise InvalidRequest("expenses: amount_cents must be an integer number of cents")
            if category not in CATEGORIES:
                raise InvalidRequest(f"expenses: unknown category {category!r}; use one of {', '.join(CATEGORIES)}")
            item = {
                "id": f"x{len(self.env.db_expenses) + 1}",
                "amount_cents": amount_cents,
                "currency": currency,
                "category": category,
                "date": date,
            }
            self.env.db_expenses.append(item)
            return dict(item)

        return self.env.call("expenses.submit", {"amount_cents": amount_cents, "category": category}, run)

    def update(self, expense_id: str, amount_cents: int) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            for item in self.env.db_expenses:
                if item["id"] == expense_id:
                    item["amount_cents"] = int(amount_cents)
                    return dict(item)
            raise NotFound(f"expenses: no expense {expense_id}")

        return self.env.call("expenses.update", {"expense_id": expense_id, "amount_cents": amount_cents}, run)

    def list(self, month: str, page: int = 1) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            hits = [x for x in self.env.db_expenses if x["date"].startswith(month)]
            chunk = hits[(page - 1) * EXPENSE_PAGE : page * EXPENSE_PAGE]
            more = page * EXPENSE_PAGE < len(hits)
            return {"expenses": [dict(x) for x in chunk], "page": page, "next_page": page + 1 if more else None}

        return self.env.call("expenses.list", {"month": month, "page": page}, run)

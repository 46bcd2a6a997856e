"""How the claude, codex and pi CLIs (and the claude-agent-sdk) report that their model call failed, read from what
they really print (recorded in `tests/fixtures/real_clis/`):

- `claude -p --output-format json`: one `result` object with `is_error`, `api_error_status`, `api_error_type` and
  the error itself in `result` ("API Error: 500 ...", "Invalid API key · Fix external API key", "You've hit your
  5-hour limit · resets 11:33pm (UTC)"); exit 1.
- `codex exec --json`: `error` and `turn.failed` events whose `message` is the error ("unexpected status 401
  Unauthorized: ...", "exceeded retry limit, last status: 429 Too Many Requests", "We’re currently experiencing
  high demand ...", "You’ve hit your usage limit. ... try again at 11:34 PM.", "Missing environment variable:
  `OPENAI_API_KEY`."); exit 1. An `error` *item* (model metadata missing) is a warning, not a failure, and so is an
  `error` event "Reconnecting... 1/5 (stream disconnected ...)" followed by the answer.
- `pi --mode json`: exit 0 even when every call failed: the last assistant message has `"stopReason": "error"` and
  `errorMessage` "<status> <the API's JSON body>"; `auto_retry_end` with `success: false` carries `finalError`. A
  missing key is "No API key found for <provider>." on stderr, exit 1, no JSON.

A sandbox that cannot start is a failure of its own (`sandbox`), whatever the exit code says: bubblewrap's own
"bwrap: execvp pi: No such file or directory" (exit 1, nothing on stdout), and codex's "could not create PATH
aliases: Refusing to create helper binaries under temporary dir" on stderr (`CODEX_HOME` under /tmp: codex exits 0,
but every command the model runs fails inside its session with `bwrap: execvp codex-linux-sandbox`).

`read_failure` turns that into a `CLIFailure` (auth, transient, usage_limit, sandbox, error) with the error's own text;
`usage_reset` finds when a usage window opens again from its message.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from saddler.agentcli import json_objects

Kind = Literal["auth", "transient", "usage_limit", "sandbox", "error"]
TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
AUTH_STATUS = frozenset({401, 403})
_AUTH = re.compile(
    r"invalid api key|invalid x-api-key|authentication[_ ]?(?:failed|error)|\bunauthorized\b|not logged in|"
    r"please run /login|no api key found|api key (?:is )?(?:missing|not set|required)|incorrect api key|"
    r"missing api key|oauth token (?:has )?expired|missing bearer|missing environment variable: `?\w*(?:key|token)\b",
    re.IGNORECASE,
)
_TRANSIENT = re.compile(
    r"rate.?limit|overloaded|too many requests|\b(?:429|500|502|503|504|529)\b|econnreset|temporarily unavailable|"
    r"high demand|at capacity|exceeded retry limit|stream disconnected|connection (?:reset|refused|error)",
    re.IGNORECASE,
)
_USAGE = re.compile(
    r"hit your (?:[\w-]+ )*(?:usage )?limit|usage limit (?:reached|has been reached)|usage_limit_reached|"
    r"out of (?:extra )?usage",
    re.IGNORECASE,
)
_CODEX_NO_SANDBOX = re.compile(r"^.*Refusing to create helper binaries under temporary dir.*$", re.MULTILINE)
_BWRAP_FAILED = re.compile(r"^bwrap: .+$", re.MULTILINE)
_STATUS_PREFIX = re.compile(r"^\s*(\d{3})\b")
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                       "dec"), start=1)}  # fmt: skip
_CLAUDE_RESET = re.compile(
    r"resets\s+(?:(?P<mon>[A-Za-z]{3})[a-z]*\s+(?P<day>\d{1,2}),?\s+(?:at\s+)?)?(?P<h>\d{1,2})(?::(?P<m>\d{2}))?"
    r"\s*(?P<ap>am|pm)(?:\s*\((?P<tz>[^)]+)\))?",
    re.IGNORECASE,
)
_CODEX_RESET = re.compile(
    r"try again (?:at|in)\s+"
    r"(?:(?P<mon>[A-Za-z]{3})[a-z]*\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?:(?P<year>\d{4})\s+)?)?"
    r"(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ap>AM|PM|am|pm)",
)
_EPOCH = re.compile(r"usage limit reached\|(\d{9,11})", re.IGNORECASE)


@dataclass(frozen=True)
class CLIFailure:
    """A failed model call as the CLI reported it. `message`: the error itself (not the tail of a JSON line);
    `status`: the HTTP status when the CLI gives one; `resets_at`: for `usage_limit`, when the window opens again
    (seconds since the epoch), None when the message does not say."""

    kind: Kind
    message: str
    status: int | None = None
    resets_at: float | None = None


def classify(message: str, status: int | None, now: dt.datetime) -> CLIFailure:
    """The kind of one error message (and its HTTP status, when known)."""
    message = message.strip()
    if _USAGE.search(message):
        return CLIFailure("usage_limit", message, status, usage_reset(message, now))
    if status in AUTH_STATUS or (status is None and _AUTH.search(message)):
        return CLIFailure("auth", message, status)
    if status in TRANSIENT_STATUS or (status is None and _TRANSIENT.search(message)):
        return CLIFailure("transient", message, status)
    return CLIFailure("error", message, status)


def read_failure(stdout: str, stderr: str, returncode: int | None, now: dt.datetime) -> CLIFailure | None:
    """The failure a CLI's output reports, or None when it reports none (see module docstring)."""
    sandbox = sandbox_failure(stdout, stderr, returncode)
    if sandbox is not None:
        return sandbox
    objects = json_objects(stdout)
    for obj in reversed(objects):
        if obj.get("type") == "result" and "is_error" in obj:  # claude -p --output-format json
            if not obj.get("is_error") or str(obj.get("subtype", "")).startswith("error_max"):
                return None
            status = obj.get("api_error_status")
            text = str(obj.get("result") or "; ".join(obj.get("errors") or []) or obj.get("subtype") or "error")
            return classify(text, status if isinstance(status, int) else None, now)
    if any(o.get("type") == "turn.completed" for o in objects):
        return None  # codex answered (reconnects and warnings before it were retried by codex itself)
    failed = [o for o in objects if o.get("type") in ("turn.failed", "error")]
    if failed:  # codex exec --json
        last = failed[-1]
        error: dict[str, Any] = last["error"] if isinstance(last.get("error"), dict) else {}
        text = str(error.get("message") or last.get("message") or "")
        return classify(_inner_message(text), _status_in(text), now)
    pi = _pi_failure(objects)
    if pi is not None:
        status, text = pi
        return classify(text, status, now)
    if returncode not in (0, None) and stderr.strip():  # pi's missing key; any CLI's dropped connection
        found = classify(stderr.strip()[-2000:], None, now)
        return found if found.kind != "error" else None  # the caller reports the exit code
    return None


def sandbox_failure(stdout: str, stderr: str, returncode: int | None) -> CLIFailure | None:
    """The sandbox around the agent (saddler's bubblewrap, codex's own) could not start, or None."""
    codex = _CODEX_NO_SANDBOX.search(stderr)
    if codex:
        return CLIFailure("sandbox", codex.group(0).strip())
    bwrap = _BWRAP_FAILED.search(stderr)
    if bwrap and returncode not in (0, None) and not stdout.strip():
        return CLIFailure("sandbox", bwrap.group(0).strip())
    return None


def _pi_failure(objects: list[dict[str, Any]]) -> tuple[int | None, str] | None:
    """pi's last assistant message when it ended in error (`stopReason: error`), as (status, message)."""
    last: dict[str, Any] | None = None
    for obj in objects:
        message = obj.get("message")
        if obj.get("type") == "message_end" and isinstance(message, dict) and message.get("role") == "assistant":
            last = message
    if last is None or last.get("stopReason") != "error":
        return None
    raw = str(last.get("errorMessage") or "error")
    match = _STATUS_PREFIX.match(raw)
    status = int(match.group(1)) if match else None
    return status, _inner_message(raw[match.end() :] if match else raw) if match else raw


def _inner_message(text: str) -> str:
    """The `error.message` of an API's JSON error body inside `text`, else `text`."""
    start = text.find("{")
    if start < 0:
        return text.strip()
    try:
        body = json.loads(text[start:])
    except json.JSONDecodeError:
        return text.strip()
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        prefix = text[:start].strip()
        return f"{prefix} {error['message']}".strip() if prefix and not prefix.startswith("{") else error["message"]
    return text.strip()


def _status_in(text: str) -> int | None:
    match = re.search(r"(?:status:?|\bstatus\s)\s*(\d{3})\b|^\s*(\d{3})\s|\"status\":\s*(\d{3})", text)
    if match:
        return int(next(g for g in match.groups() if g))
    return None


def usage_reset(message: str, now: dt.datetime) -> float | None:
    """When the usage window a message names opens again (seconds since the epoch): claude's "resets 11:33pm (UTC)"
    or "resets Dec 8, 11pm (Europe/Berlin)", its older "usage limit reached|<epoch>", codex's "try again at 11:34
    PM" or "try again at Dec 3rd, 2026 11:34 PM" (codex prints the machine's local time). The next such moment
    after `now` (an aware datetime); None when the message names no time."""
    epoch = _EPOCH.search(message)
    if epoch:
        return float(epoch.group(1))
    for pattern in (_CLAUDE_RESET, _CODEX_RESET):
        match = pattern.search(message)
        if match:
            return _next_moment(match.groupdict(), now)
    return None


def _next_moment(parts: dict[str, str | None], now: dt.datetime) -> float | None:
    zone: dt.tzinfo = now.tzinfo or dt.UTC
    if parts.get("tz"):
        try:
            zone = ZoneInfo(str(parts["tz"]).strip())
        except (ZoneInfoNotFoundError, ValueError):
            zone = dt.UTC if str(parts["tz"]).strip().upper() in ("UTC", "GMT") else zone
    local = now.astimezone(zone)
    hour = int(parts["h"] or "0") % 12 + (12 if str(parts["ap"]).lower() == "pm" else 0)
    minute = int(parts["m"] or 0)
    year = int(str(parts["year"])) if parts.get("year") else local.year
    month = _MONTHS.get(str(parts["mon"] or "").lower()[:3], local.month) if parts.get("mon") else local.month
    day = int(str(parts["day"])) if parts.get("day") else local.day
    try:
        moment = local.replace(year=year, month=month, day=day, hour=hour, minute=minute, second=0, microsecond=0)
    except ValueError:
        return None
    if moment <= local and not parts.get("day"):
        moment += dt.timedelta(days=1)
    elif moment <= local and not parts.get("year"):
        moment = moment.replace(year=moment.year + 1)
    return moment.timestamp()

"""The usage window's record in the store (`session.usage_window` and `session.usage_window_opened` events), read
by the loop's wait (`saddler.run.usage_window`) and by `saddler status`."""

from __future__ import annotations

import datetime as dt
import time

from evodag.store import EvoDAG

WINDOW_EVENT = "session.usage_window"
OPENED_EVENT = "session.usage_window_opened"


def closed_until(store: EvoDAG, run_id: int) -> float | None:
    """`resets_at` of the run's last `session.usage_window` event when no `session.usage_window_opened` followed it."""
    windows = store.events(run_id=run_id, kind=WINDOW_EVENT)
    if not windows:
        return None
    last = windows[-1]
    opened = [e for e in store.events(run_id=run_id, kind=OPENED_EVENT) if e.id > last.id]
    return None if opened else float(last.payload["resets_at"])


def clock_time(epoch: float, now: float | None = None) -> str:
    """`HH:MM` in local time, with the date when it is not the day of `now` (default: the wall clock)."""
    moment = dt.datetime.fromtimestamp(epoch).astimezone()
    today = dt.datetime.fromtimestamp(time.time() if now is None else now).astimezone().date()
    return moment.strftime("%H:%M") if moment.date() == today else moment.strftime("%Y-%m-%d %H:%M")

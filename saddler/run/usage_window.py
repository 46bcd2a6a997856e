"""Waiting for a subscription's usage window, so a run left overnight goes on when the plan's allowance resets.

When a session ends with the CLI's (or the SDK's) usage-limit message (`saddler.sessions.failures`), the session is
not recorded as paid: the window is logged as a `session.usage_window` event (`resets_at`, the message) and the
run waits until it opens (`saddler status` says `waiting for the usage window until HH:MM`), then asks the same
session again. A run killed while it waits finds the event when it resumes and waits for the same moment: it
never calls the model inside a closed window and never pays a finished session twice. With
`sessions.on_usage_limit = "fallback_model"` the sessions move to `sessions.fallback_model` instead (once);
`"stop"` ends the run with the reset time in the error. A window that opens later than `sessions.max_usage_wait_h`
(or a message without a time, after `sessions.usage_retry_s`) is waited for at most that long.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from evodag.store import EvoDAG
from saddler.config import SessionConfig
from saddler.errors import BackendError
from saddler.sessions.llm_backend import UsageLimitError
from saddler.sessions.usage_events import OPENED_EVENT, WINDOW_EVENT, clock_time, closed_until

MARGIN_S = 30.0  # a window named to the minute: ask again a little after it


@dataclass
class UsageWindow:
    """The run's view of its usage window: `wait()` before a session, `closed(exc, ...)` when one hit the limit.
    `sleep` and `clock` (seconds since the epoch) are injected; `say` prints the waits."""

    store: EvoDAG
    run_id: int
    config: SessionConfig
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    say: Callable[[str], None] = lambda _text: None
    use_fallback: Callable[[], bool] = lambda: False

    def pending(self) -> float | None:
        """When the last logged window opens, if no session ran since it opened; None when none is closed."""
        return closed_until(self.store, self.run_id)

    def wait(self) -> None:
        """Sleep until the logged window opens (nothing when none is closed), then log that it opened."""
        until = self.pending()
        if until is None:
            return
        left = until - self.clock()
        if left > 0:
            self.say(f"waiting for the usage window until {clock_time(until, self.clock())}")
            self.sleep(left)
        self.store.log_event(OPENED_EVENT, {"resets_at": until}, run_id=self.run_id)

    def closed(self, exc: UsageLimitError, role: str, iteration: int) -> None:
        """A session of `role` hit the usage limit: move to the fallback model, or log the window to wait for
        (`wait` then sleeps), or raise `BackendError` when the config says stop."""
        policy = self.config.on_usage_limit
        if policy == "fallback_model" and self.use_fallback():
            self.store.log_event(
                "session.fallback_model",
                {"role": role, "iteration": iteration, "model": self.config.fallback_model, "message": exc.message},
                run_id=self.run_id,
            )
            self.say(f"usage limit reached: sessions continue on {self.config.fallback_model}")
            return
        now = self.clock()
        longest = self.config.max_usage_wait_h * 3600
        resets_at = exc.resets_at if exc.resets_at is not None else now + self.config.usage_retry_s
        until = min(resets_at + MARGIN_S, now + longest)
        if policy == "stop" or longest <= 0:
            raise BackendError(
                f"the model's usage limit was reached ({exc.message[:200]}); "
                f"it resets at {clock_time(resets_at, now)}: "
                'run `saddler run` again then (or set sessions.on_usage_limit = "wait")'
            )
        self.store.log_event(
            WINDOW_EVENT,
            {
                "role": role,
                "iteration": iteration,
                "message": exc.message[:500],
                "resets_at": until,
                "announced_reset": exc.resets_at,
            },
            run_id=self.run_id,
        )

"""The decision words: a node's statuses, an iteration's decisions, which of them count as kept, and the stall rule.

One home for each: the store checks what it is given against these, and the optimizer, the seed modes, the
sessions and the reports import them (a test fails when a copy of the kept set reappears elsewhere).

- A node's status (`NODE_STATUSES`): `baseline`, `pending` (not decided yet), then `accepted`, `neutral` (kept:
  an equal score kept by approval), `rejected` or `invalid` (the candidate could not be built or evaluated).
- An iteration's decision (`DECISIONS`): a candidate's status (`accepted`, `neutral`, `rejected`, `invalid`), or
  `no_patch` (the session changed nothing) or `no_training_failures` (the parent passed its whole mini-batch, no
  session ran). `close` is an acceptance verdict, never stored: more evidence is gathered and it is asked again.
- Kept: `KEPT_DECISIONS` (accepted, neutral) for a decision, `KEPT_STATUSES` (those and the baseline) for a node
  that stays a parent the search builds on.
- The stall count (`stall_after`): the discard streak the plateau, the stall limit and the phase switch read.
- The seeds' own words map onto the store's: the 000 seed's KEEP / NEUTRAL / DISCARD (`SKILL_VERDICT_STATUS`)
  and the autoresearch results.tsv's keep / discard / crash (`TSV_STATUS`, `STATUS_TSV`).
"""

from __future__ import annotations

from collections.abc import Iterable

BASELINE, PENDING, ACCEPTED, NEUTRAL, REJECTED, INVALID = (
    "baseline", "pending", "accepted", "neutral", "rejected", "invalid",
)  # fmt: skip
NO_PATCH = "no_patch"
NO_TRAINING_FAILURES = "no_training_failures"
"""The decision of an iteration whose parent passed every task of its mini-batch: no session ran."""
CLOSE = "close"
"""The verdict of a sequential acceptance that needs more evidence (never stored: the loop gathers and asks again)."""

NODE_STATUSES = (BASELINE, PENDING, INVALID, REJECTED, ACCEPTED, NEUTRAL)
DECISIONS = (ACCEPTED, REJECTED, INVALID, NO_PATCH, NEUTRAL, NO_TRAINING_FAILURES)
KEPT_DECISIONS = (ACCEPTED, NEUTRAL)
KEPT_STATUSES = (BASELINE, *KEPT_DECISIONS)
FRUITLESS = (REJECTED, INVALID, NO_PATCH)
"""Decisions of an attempt that left nothing behind (a sampler may move on from the tasks it was made for)."""

SKILL_VERDICT_STATUS = {"KEEP": ACCEPTED, "NEUTRAL": NEUTRAL, "DISCARD": REJECTED}
"""The 000 seed's verdicts as node statuses."""
STATUS_TSV = {BASELINE: "keep", ACCEPTED: "keep", NEUTRAL: "keep", REJECTED: "discard", INVALID: "crash"}
"""A decided node's status as an autoresearch results.tsv status (pending nodes have none)."""
TSV_STATUS = {"keep": ACCEPTED, "discard": REJECTED, "crash": INVALID}
"""An autoresearch results.tsv status (the 002 seed's keep / discard) as a node status."""


def stall_after(count: int, decision: str | None, *, neutral_holds: bool = False) -> int:
    """The discard streak after `decision`, `count` before it.

    A kept decision (accepted, neutral) ends the streak; every other decision extends it, except none (an
    unfinished iteration) and `no_training_failures`: nothing was attempted, so nothing was discarded, and a streak
    of saturated batches alone never switches on exploration nor stops a run as stalled. `neutral_holds` is the 000
    seed's rule: an approved NEUTRAL neither ends nor extends the streak ("consecutive_stalls not incremented")."""
    if decision == ACCEPTED or (decision == NEUTRAL and not neutral_holds):
        return 0
    if decision is None or decision in (NO_TRAINING_FAILURES, NEUTRAL):
        return count
    return count + 1


def running_stalls(decisions: Iterable[str | None], *, neutral_holds: bool = False) -> list[int]:
    """The discard streak after each decision, in order; the last one is `trailing_stalls`."""
    counts, count = [], 0
    for decision in decisions:
        count = stall_after(count, decision, neutral_holds=neutral_holds)
        counts.append(count)
    return counts


def trailing_stalls(decisions: Iterable[str | None], *, neutral_holds: bool = False) -> int:
    """Consecutive discarded attempts at the end of `decisions` (the plateau and stall counter, see `stall_after`)."""
    counts = running_stalls(decisions, neutral_holds=neutral_holds)
    return counts[-1] if counts else 0

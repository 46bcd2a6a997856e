"""The simulated task agent: the fixed "model" of opsdesk. Deterministic for (task, seed, harness).

It reads the harness's system prompt for a fixed vocabulary of directives (see DIRECTIVES and the
README), picks tools by matching an intent to each tool's name + description, and makes seeded,
jagged mistakes whose rates depend on the task family and the step type. Harness features (retries,
pagination, time-zone handling, verification hooks) and directives lower them. Every decision it takes
is drawn from a stream keyed by (task, seed, decision label), so unrelated harness changes do not
reshuffle its luck.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator

from benchmarks.opsdesk.session import Action
from benchmarks.simmodel import SeededModel, best_tool, tokens

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

    Step = Generator[Action, Any, Any]


# directive -> pattern recognised (case-insensitive) in the system prompt or in a reminder
DIRECTIVES: dict[str, str] = {
    "verify": r"\bverify\b|double-check",
    "disambiguate": r"(several|more than one|multiple) (contacts|matches|people)",
    "retry_transient": r"\bretry\b[^.]*\b(transient|temporary|503)",
    "wait_rate_limit": r"rate[- ]limit",
    "local_time": r"\btime ?zone\b",
    "infer_emails": r"first\.last@",
}
# jagged base rates: a draft mistake per family (caught by verification before it is committed)
SLIP = {
    "schedule": 0.15,
    "schedule_confirm": 0.15,
    "email_report": 0.10,
    "file_expense": 0.22,
    "expense_total": 0.08,
    "count_events": 0.06,
    "meeting_time": 0.05,
    "reply_latest": 0.04,
}
SKIP = {"schedule_confirm": 0.35, "bulk_notify": 0.1, "bulk_small": 0.1}  # forgetting a requested step
P_RETRY, P_RETRY_DIRECTED = 0.45, 0.9
P_WAIT, P_WAIT_DIRECTED = 0.6, 0.95
P_PICK, P_PICK_DIRECTED = 0.55, 0.97  # choosing the right one of several visible contacts
P_TZ_SLIP = 0.12  # converting time zones by itself
P_CATCH_PRE, P_CATCH_REVIEW, P_CATCH_REMINDER = 0.85, 0.85, 0.9
CAPABILITY = {
    "expense": "expenses",
    "calendar": "calendar",
    "contact": "contacts",
    "email": "mail",
    "file": "files",
    "profile": "profile",
    "wait": "util",
}


class GiveUp(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class SimAgent(SeededModel):
    """One episode of the simulated model. `next_action(observation)` returns the next `Action`."""

    def __init__(
        self,
        spec: Any,
        system_prompt: str,
        tools: list[tuple[str, str]],
        seed: int,
        noise: float,
        log: Callable[[dict[str, Any]], None],
        plan: Callable[[SimAgent], Step],
    ) -> None:
        self.spec, self.prompt, self.seed, self.noise, self._log = spec, spec.prompt, seed, noise, log
        self.tools = [(name, tokens(name + " " + desc)) for name, desc in tools]
        self.directives = {d for d, pat in DIRECTIVES.items() if re.search(pat, system_prompt, re.I)}
        self.reminded: set[str] = set()
        self.review_due = False
        self.fixups: list[tuple[str, Callable[[], Step]]] = []  # committed or skipped mistakes and their repair
        self.facts: dict[str, Any] = {}
        self._counts: dict[str, int] = {}
        self._gen = self._main(plan)
        self._started = False
        log({"type": "directives", "recognised": sorted(self.directives)})

    # driving (randomness and `next_action` come from `SeededModel`) ------------------------------
    def _done(self) -> Action:
        return Action("finish", answer=self.facts.get("answer", ""))

    def remind(self, text: str) -> None:
        found = {d for d, pat in DIRECTIVES.items() if re.search(pat, text, re.I)}
        self.reminded |= found
        self.review_due = self.review_due or "verify" in found

    def _main(self, plan: Callable[[SimAgent], Step]) -> Step:
        try:
            self.facts["answer"] = yield from plan(self)
            if "verify" in self.directives:
                yield from self.review(P_CATCH_REVIEW, "prompt directive")
        except GiveUp as exc:
            self._log({"type": "give_up", "code": exc.code, "message": str(exc)})
            self.facts["answer"] = f"Could not complete the task: {exc}"
        while True:
            yield Action("finish", answer=str(self.facts["answer"]))
            if self.review_due:
                self.review_due = False
                try:
                    yield from self.review(P_CATCH_REMINDER, "reminder")
                except GiveUp as exc:
                    self._log({"type": "give_up", "code": exc.code, "message": str(exc)})

    # building blocks -----------------------------------------------------------------------------
    def pick(self, intent: str) -> str | None:
        return best_tool(intent, self.tools)

    def use(self, intent: str, args: dict[str, Any]) -> Step:
        """Call the tool that fits `intent`; handle errors the way the model does; return the result."""
        name = self.pick(intent)
        if name is None:
            noun = next((w for w in tokens(intent) if w in CAPABILITY), "tool")
            cap = CAPABILITY.get(noun, noun)
            self._log({"type": "no_tool", "intent": intent, "capability": cap})
            raise GiveUp(f"missing_tool:{cap}", f"no tool available to {intent}")
        for _attempt in range(6):
            obs = yield Action("tool", tool=name, args=dict(args))
            if obs is None:
                self.note(f"{name} returned nothing")
                return None
            if obs["ok"]:
                return obs["result"]
            kind = obs["error"]
            self._log({"type": "error_seen", "tool": name, "error": kind, "message": obs["message"]})
            if kind == "transient":
                p = P_RETRY_DIRECTED if "retry_transient" in self.directives else P_RETRY
                if self.chance("retry", p):
                    self.note("temporary error; trying again")
                    continue
                raise GiveUp("transient", f"{name} failed: {obs['message']}")
            if kind == "rate_limited":
                p = P_WAIT_DIRECTED if "wait_rate_limit" in self.directives else P_WAIT
                if self.chance("wait", p):
                    waiter = self.pick("wait seconds")
                    if waiter:
                        yield Action("tool", tool=waiter, args={"seconds": obs["retry_after"]})
                continue
            raise GiveUp(kind, f"{name} failed: {obs['message']}")
        raise GiveUp("retries_exhausted", f"{name} kept failing")

    def find_contact(self, search: str, hint: str) -> Step:
        """The email of the person the task means: inferred, looked up, or (sometimes wrongly) guessed."""
        if "infer_emails" in self.directives and " " in search and not hint:
            domain = re.search(r"mail domain ([\w.-]+)", self.prompt)
            if domain:
                first, last = search.lower().split()[:2]
                self.note("inferring the address instead of looking it up")
                return f"{first}.{last}@{domain.group(1).rstrip('.')}"
        found = yield from self.use("find contact email", {"name": search})
        candidates = found if isinstance(found, list) else [found] if isinstance(found, dict) else []
        candidates = [c for c in candidates if isinstance(c, dict) and c.get("email")]
        if not candidates:
            raise GiveUp("not_found", f"no contact found for {search}")
        if len(candidates) == 1:
            return candidates[0]["email"]
        p = P_PICK_DIRECTED if "disambiguate" in self.directives else P_PICK
        fitting = [c for c in candidates if hint and hint.lower() in str(c.get("department", "")).lower()]
        if fitting and self.chance("pick_contact", p):
            return fitting[0]["email"]
        self._log({"type": "guess", "what": "contact", "among": len(candidates)})
        return candidates[0]["email"]

    def precheck(self, family: str) -> bool:
        """A draft mistake for this step; True when it survives (verification before writing may catch it)."""
        if not self.mistake(f"slip:{family}", SLIP.get(family, 0.0)):
            return False
        if "verify" in self.directives and self.chance("precheck", P_CATCH_PRE):
            self._log({"type": "verify", "caught": "draft mistake before writing"})
            return False
        return True

    def review(self, p: float, why: str) -> Step:
        """Re-check the work: each pending fix-up is found with probability p and repaired."""
        self._log({"type": "verify", "why": why, "pending": len(self.fixups)})
        remaining = []
        for label, repair in self.fixups:
            if self.chance("review", p):
                self.note(f"review found: {label}")
                yield from repair()
            else:
                remaining.append((label, repair))
        self.fixups = remaining

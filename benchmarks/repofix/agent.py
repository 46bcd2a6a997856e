"""The simulated coding model: the fixed "LLM" of repofix. Deterministic for (task, seed, harness).

It reads the system prompt (and reminders) for a fixed vocabulary of directives (DIRECTIVES, see the README),
picks tools by matching what it wants to do against each tool's name + description, passes only arguments a
tool's description names, reads tool output as text (what a middleware cut is gone) and makes seeded mistakes
whose rates depend on the bug family and the step (jagged: SLIP, P_PARTIAL, …). Every decision is drawn from
a stream keyed by (task, seed, decision label, count), so a harness change that does not touch a decision does
not change its outcome.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator

from benchmarks.repofix.session import Action
from benchmarks.simmodel import SeededModel, best_tool, tokens

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

    Step = Generator[Action, Any, Any]

# directive -> pattern recognised (case-insensitive) in the system prompt or a reminder
DIRECTIVES: dict[str, str] = {
    "reproduce": r"\breproduc",
    "style": r"\blint\b|style rules",
    "no_test_edits": r"\b(never|do not|don't) (modify|edit|change) (the |any )?(existing )?tests\b",
    "all_sites": r"every (other )?(place|call site|caller|use)\b|all (the )?call sites",
    "edge_cases": r"\bedge cases\b",
    "rerun": r"\bre-?run\b[^.]*\b(unrelated|flaky|intermittent)",
    "unique": r"\bunique\b|surrounding (lines|context)",
    "verify": r"\bverify\b|double-check|run the tests",
}
# jagged first-draft mistakes per family (a reproduction catches them; the second draft slips less)
SLIP = {"off_by_one": 0.25, "api_misuse": 0.10, "multi_file": 0.12, "flaky_test": 0.15}
P_PARTIAL, P_PARTIAL_TOLD = 0.45, 0.12  # edge_case: handle the reported case only
P_OVERBROAD = 0.3  # api_misuse: change the shared wrapper's default instead of the call
P_FORGET_SITE, P_FORGET_SITE_TOLD = 0.30, 0.08  # multi_file: leave one of the places out
P_TEST_EDIT, P_TEST_EDIT_TOLD = 0.45, 0.10  # flaky_test: make the test tolerate it instead of fixing the cause
P_SYNTAX = 0.05  # an edit that does not parse
STYLE_SLIPS = {"trailing": (0.10, 0.03), "quotes": (0.20, 0.05), "indent": (0.20, 0.05), "comment": (0.15, 0.04)}
P_REPRO, P_TESTS, P_LINT = 0.2, 0.6, 0.15  # unprompted habits: reproduce first, test before submitting, lint
P_CHASE = 0.4  # a failure its change cannot have caused: believe it did, and revert the change
P_REPAIR, P_REPAIR_BLIND = 0.85, 0.35  # mending its own breakage: with the failure message, or the test name only
P_BLIND_EDIT = 0.3  # writing the exact line to replace without having seen it
P_NOTICE_COPY = 0.3  # noticing that a `build/` hit is a stale copy, not the source
P_REFINE = 0.6  # narrowing a search whose results were cut
P_RETRY = 0.9  # taking a tool's refusal (ambiguous text, syntax error) and redoing the edit right
P_HEED = 0.8  # acting on a hook's reminder (a loop that refuses the submission is not a suggestion)
P_REDO = 0.6  # after the loop reverted its change because a test failed: draft the fix again
P_FORGET_READ = 0.35  # after a condensed history: a file's content has to be read again
REFIX_SCALE = 0.3  # the second draft's mistake rates, relative to the first


class GiveUp(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class SimCoder(SeededModel):
    """One episode of the simulated model. `next_action(observation)` returns the next `Action`."""

    def __init__(
        self,
        spec: Any,
        repo: Any,
        system_prompt: str,
        tools: list[tuple[str, str]],
        seed: int,
        noise: float,
        log: Callable[[dict[str, Any]], None],
        solve: Callable[[SimCoder], Step],
        review: Callable[[SimCoder], Step],
    ) -> None:
        self.spec, self.repo, self.prompt, self.seed, self.noise, self._log = spec, repo, spec.prompt, seed, noise, log
        self.descriptions = dict(tools)
        self.tools = [(name, tokens(name + " " + desc)) for name, desc in tools]
        self.directives = {d for d, pat in DIRECTIVES.items() if re.search(pat, system_prompt, re.I)}
        self.reminded: set[str] = set()
        self.review_due = False
        self.messages: list[str] = []  # what the loop told it
        self.notices: list[dict[str, Any]] = []  # results of calls made on its behalf
        self.seen: dict[str, str] = {}  # file -> the text of it the model has in mind
        self.edits: list[dict[str, Any]] = []  # its own edits, as it remembers them
        self.facts: dict[str, Any] = {}
        self.unavailable: set[str] = set()
        self._counts: dict[str, int] = {}
        self._review = review
        self._gen = self._main(solve)
        self._started = False
        log({"type": "directives", "recognised": sorted(self.directives)})

    # directives, randomness (`SeededModel`) and the trace ---------------------------------------------
    def told(self, directive: str) -> bool:
        return directive in self.directives or directive in self.reminded

    def log(self, event: dict[str, Any]) -> None:
        self._log(event)

    # what the loop calls (and `next_action`, from `SeededModel`) ------------------------------------------
    def _done(self) -> Action:
        return Action("submit", summary=self.facts.get("summary", ""))

    def notice(self, obs: dict[str, Any]) -> None:
        self.notices.append(obs)

    def tell(self, text: str) -> None:
        self.messages.append(text)

    def remind(self, text: str) -> None:
        if not self.chance("heed", P_HEED):
            self.note("noted the reminder; the work looks done")
            return
        found = {d for d, pat in DIRECTIVES.items() if re.search(pat, text, re.I)}
        self.reminded |= found
        self.review_due = self.review_due or bool(found & {"verify", "reproduce", "style"})

    def forget(self, condensed: int) -> None:
        for path in sorted(self.seen):
            if self.chance("forget_read", P_FORGET_READ):
                del self.seen[path]
        self.note(f"the history was condensed ({condensed} older observations summarised)")

    def _main(self, solve: Callable[[SimCoder], Step]) -> Step:
        try:
            self.facts["summary"] = yield from solve(self)
        except GiveUp as exc:
            self._log({"type": "give_up", "code": exc.code, "message": str(exc)})
            self.facts["summary"] = f"Could not fix the issue: {exc}"
        while True:
            yield Action("submit", summary=str(self.facts["summary"]))
            if self.review_due or self.messages:
                self.review_due = False
                try:
                    yield from self._review(self)
                except GiveUp as exc:
                    self._log({"type": "give_up", "code": exc.code, "message": str(exc)})

    # tools ------------------------------------------------------------------------------------------------
    def pick(self, intent: str) -> str | None:
        return best_tool(intent, self.tools)

    def accepts(self, tool: str, argument: str) -> bool:
        """Whether the tool's description names `argument` (the model passes nothing else)."""
        return tokens(argument) <= tokens(self.descriptions.get(tool, ""))

    def use(self, intent: str, args: dict[str, Any], capability: str, at_least: int = 2) -> Step:
        """Call the tool that fits `intent` with `args`; the observation dict. No fitting tool: `GiveUp`."""
        name = best_tool(intent, self.tools, at_least)
        if name is None:
            if capability not in self.unavailable:
                self._log({"type": "no_tool", "intent": intent, "capability": capability})
            self.unavailable.add(capability)
            raise GiveUp(f"missing_tool:{capability}", f"no tool available to {intent}")
        obs = yield Action("tool", tool=name, args={k: v for k, v in args.items() if v is not None})
        return obs if isinstance(obs, dict) else {"ok": False, "error": "none", "text": ""}

    def try_use(self, intent: str, args: dict[str, Any], capability: str, at_least: int = 2) -> Step:
        """`use`, but a missing tool is noted and answered with None instead of giving up."""
        try:
            return (yield from self.use(intent, args, capability, at_least))
        except GiveUp:
            self.note(f"no tool to {intent}; going on without it")
            return None


def parse_hits(text: str) -> tuple[list[tuple[str, int, str]], bool]:
    """(path, line, text) of each `path:line:text` row of a search result, and whether rows were left out."""
    hits = []
    for row in text.split("\n"):
        match = re.match(r"^(\S+?\.\w+):(\d+):(.*)$", row)
        if match:
            hits.append((match.group(1), int(match.group(2)), match.group(3)))
    return hits, bool(re.search(r"\bmore\b|not shown|truncated", text))


def parse_run(text: str) -> dict[str, Any]:
    """What a model makes of a test log: failing tests (with their message when the summary is in view), files
    that failed to collect, whether the run timed out, and tests a rerun showed to be flaky."""
    failed: dict[str, str] = {}
    for match in re.finditer(r"^(\S+::\w+) FAILED", text, re.M):
        failed.setdefault(match.group(1), "")
    for match in re.finditer(r"^FAILED (\S+::\w+) - (.*)$", text, re.M):
        failed[match.group(1)] = match.group(2)
    errors = {m.group(1): m.group(2) for m in re.finditer(r"^ERROR (\S+) - (.*)$", text, re.M)}
    flaky = set(re.findall(r"^(\S+::\w+) passed on rerun", text, re.M))
    failed = {t: m for t, m in failed.items() if t not in flaky}
    return {
        "failed": failed,
        "errors": errors,
        "flaky": flaky,
        "timed_out": "timed out" in text or "was killed" in text,
        "unseen_failure": not failed and not errors and bool(re.search(r"\d+ failed|\d+ errors?\b|FAILED", text)),
    }

"""What the simulated benchmarks' models and tasks share (opsdesk, repofix): tool choice by words, seeded
decisions, a task spec with hidden oracle parameters, a grade as a list of named checks.

Rollout children import this module: it imports only the stdlib at run time.
"""

from __future__ import annotations

import random
import re

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from saddler.benchmark import Task


# tool choice ---------------------------------------------------------------------------------------------------


def tokens(text: str) -> set[str]:
    """Lower-case words of `text`, a plural `s` dropped from words longer than three letters."""
    out = set()
    for word in re.split(r"[^a-z0-9]+", text.lower()):
        if len(word) > 3 and word.endswith("s"):
            word = word[:-1]
        if word:
            out.add(word)
    return out


def best_tool(intent: str, tools: list[tuple[str, set[str]]], at_least: int = 2) -> str | None:
    """The tool (name, words of name + description) sharing the most words with `intent` (ties: by name), if it
    shares at least `at_least`."""
    want = tokens(intent)
    scored = sorted(((len(want & toks), name) for name, toks in tools), key=lambda s: (-s[0], s[1]))
    if scored and scored[0][0] >= at_least:
        return scored[0][1]
    return None


# the simulated model and its tasks ------------------------------------------------------------------------------


class TaskSpec:
    """A task with its hidden oracle parameters (never shown to the harness)."""

    __slots__ = ("family", "group", "id", "params", "prompt", "split")

    def __init__(self, id: str, group: str, split: str, family: str, prompt: str, params: dict[str, Any]) -> None:
        self.id, self.group, self.split, self.family = id, group, split, family
        self.prompt, self.params = prompt, params

    def task(self) -> Task:
        from saddler.benchmark import Task

        return Task(id=self.id, group=self.group, split=self.split, family=self.family, prompt=self.prompt)


class SeededModel:
    """Seeded decisions of a simulated model: each label has its own stream, keyed by (task, seed, label, n), so
    a harness change that does not touch a decision does not change its outcome. A subclass sets `spec`, `seed`,
    `noise`, `_log`, `_counts` (an empty dict), `_gen` (its generator of actions) and `_started` (False), and
    defines `_done()`, the action once the generator is exhausted."""

    spec: Any
    seed: int
    noise: float
    _log: Callable[[dict[str, Any]], None]
    _counts: dict[str, int]
    _gen: Any
    _started: bool

    def u(self, label: str) -> float:
        n = self._counts[label] = self._counts.get(label, 0) + 1
        return random.Random(f"{self.spec.id}|{self.seed}|{label}|{n}").random()

    def chance(self, label: str, p: float) -> bool:
        """True with probability p."""
        return self.u(label) < p

    def mistake(self, label: str, p: float) -> bool:
        """True with probability p scaled by the noise knob."""
        return self.u(label) < min(1.0, p * self.noise)

    def note(self, text: str, **extra: Any) -> None:
        self._log({"type": "thought", "text": text, **extra})

    def next_action(self, obs: dict[str, Any] | None) -> Any:
        """The next action, given the observation of the previous one."""
        try:
            action = next(self._gen) if not self._started else self._gen.send(obs)
            self._started = True
            return action
        except StopIteration:
            return self._done()

    def _done(self) -> Any:
        raise NotImplementedError


# grading -------------------------------------------------------------------------------------------------------


class Grade:
    """The checks of one episode: (name, ok, rationale if not ok). Score = share passed; pass = all passed."""

    def __init__(self) -> None:
        self.checks: list[tuple[str, bool, str]] = []

    def add(self, name: str, ok: bool, why: str = "") -> None:
        self.checks.append((name, ok, "" if ok else why))

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(ok for _, ok, _ in self.checks)

    @property
    def score(self) -> float:
        return sum(ok for _, ok, _ in self.checks) / len(self.checks) if self.checks else 0.0

    @property
    def failed(self) -> list[tuple[str, str]]:
        return [(name, why) for name, ok, why in self.checks if not ok]

    @property
    def rationale(self) -> str:
        return "; ".join(f"{name}: {why}" for name, why in self.failed)

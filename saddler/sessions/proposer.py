"""How the offline backend's diagnosis behaves as a patch author: `neutral` or `calibrated` (`sessions.proposer`).

The offline backend stands in for an LLM. `neutral` is an ideal author: it takes the bank patch whose symptoms
best match the failures, whatever its kind, and writes it exactly. `calibrated` behaves the way the AutoSaddler
paper measured LLM authors behave. Its numbers are the paper's published figures (§5.3, App. G), not fitted to any
result of ours:

- **Kind preference.** Without the phase structure 91.5 % of the LLM's patches were Steering edits. When a
  phase allows both kinds and a matching patch of each kind exists, `calibrated` writes the Steering one with
  probability `STEERING_SHARE_UNSTRUCTURED` (0.915).
- **Capability patches that do not work.** New tool, loop and infrastructure patches were accepted on their batch
  at 83 %, 71 % and 67 %. `calibrated` writes a capability patch of subtype tool / loop / infra as a no-effect
  edit (a comment in its first file: the idea was right, the code did not do it) with probability 1 minus that
  rate (`MISSED`). The paper publishes no such rate for Steering patches, so they are always written as meant.
- **Side effects.** Steering patches regressed tasks on their own batch more often than Capability ones (17 %
  vs 8 %). With that probability (`SIDE_EFFECT`) `calibrated` bundles an edit nobody asked for: a second bank
  patch of the same kind, chosen at random among those the symptoms did not call for. Whether that hurts is the
  benchmark's business (the proposer never knows a patch's effect).

Every draw is seeded by (run seed, iteration, attempt), so a run stays deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from saddler.benchmark import BankPatch

PROPOSERS = ("neutral", "calibrated")
STEERING_SHARE_UNSTRUCTURED = 0.915
MISSED = {"tool": 1 - 0.83, "loop": 1 - 0.71, "infra": 1 - 0.67}
SIDE_EFFECT = {"steering": 0.17, "capability": 0.08}
MISSED_NOTE = "draft note: an unfinished edit"
"""The text of a missed attempt's comment: it must not read as an instruction to a simulated model."""


@dataclass(frozen=True)
class Proposal:
    """What the author writes: `patch` as meant, or only a comment in its first file (`missed`), plus `side`, a
    second patch bundled with it (or None)."""

    patch: BankPatch
    missed: bool = False
    side: BankPatch | None = None


@dataclass
class Proposer:
    """Chooses among ranked bank patches (best match first) as the named author would; see the module docstring."""

    name: str = "neutral"

    def choose(
        self, ranked: Sequence[BankPatch], unmatched: Sequence[BankPatch], allowed_kinds: Sequence[str], label: str
    ) -> list[Proposal]:
        """Proposals in the order to try them (the first that applies is written): `ranked` are the patches that
        answer the symptoms, best first; `unmatched` the other allowed, untried ones (for side effects)."""
        if self.name == "neutral" or not ranked:
            return [Proposal(p) for p in ranked]
        rng = random.Random(f"proposer:{label}")
        kinds = {p.kind for p in ranked}
        order = list(ranked)
        if {"capability", "steering"} <= kinds and {"capability", "steering"} <= set(allowed_kinds):
            first = "steering" if rng.random() < STEERING_SHARE_UNSTRUCTURED else "capability"
            order = [p for p in ranked if p.kind == first] + [p for p in ranked if p.kind != first]
        out = []
        for patch in order:
            missed = patch.kind == "capability" and rng.random() < MISSED.get(patch.subtype, 0.0)
            side = None
            pool = [p for p in unmatched if p.kind == patch.kind and p.id != patch.id]
            if pool and rng.random() < SIDE_EFFECT.get(patch.kind, 0.0):
                side = rng.choice(sorted(pool, key=lambda p: p.id))
            out.append(Proposal(patch, missed, side))
        return out


def missed_edit(path: str) -> str:
    """The line a missed attempt appends to `path`: a comment in that file's syntax."""
    if path.endswith((".md", ".html", ".xml")):
        return f"<!-- {MISSED_NOTE} -->\n"
    if path.endswith((".js", ".ts", ".c", ".cc", ".go", ".rs", ".java")):
        return f"// {MISSED_NOTE}\n"
    return f"# {MISSED_NOTE}\n"

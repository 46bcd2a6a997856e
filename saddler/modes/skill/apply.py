"""The seed's final step 3-2: Yes replaces the original SKILL.md and commits it (only that file), No keeps the
result in the workspace only, Diff shows the change first."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from saddler.errors import ConfigError
from saddler.harness.gitcmd import git, user_identity
from saddler.modes.skill.loop import SkillOutcome

CHOICES = ("yes", "no", "diff")


@dataclass
class ApplyResult:
    choice: str
    applied: bool
    commit: str | None = None
    message: str = ""


def skill_diff(outcome: SkillOutcome) -> str:
    """Unified diff original -> final SKILL.md ('' when unchanged)."""
    return "".join(
        difflib.unified_diff(
            outcome.original_text.splitlines(keepends=True),
            outcome.best_text.splitlines(keepends=True),
            "a/SKILL.md",
            "b/SKILL.md",
        )
    )


def apply_best(outcome: SkillOutcome, choice: str) -> ApplyResult:
    """Carry out `choice`; "yes" writes the final SKILL.md over the original and commits it when the skill is
    in a git repository (a commit of SKILL.md alone, whatever else is staged)."""
    if choice not in CHOICES:
        raise ConfigError(f"--apply must be one of {', '.join(CHOICES)}, not {choice!r}")
    if choice == "diff":
        return ApplyResult("diff", False, message=skill_diff(outcome) or "(no change)")
    if choice == "no":
        return ApplyResult("no", False, message=f"kept in the workspace only: {outcome.workspace}")
    if outcome.best_text == outcome.original_text:
        return ApplyResult("yes", False, message="nothing to apply: the final SKILL.md equals the original")
    path = outcome.skill_path
    if path.read_text(encoding="utf-8") != outcome.original_text:
        raise ConfigError(f"{path} changed since the run started; review {outcome.workspace} and apply by hand")
    path.write_text(outcome.best_text, encoding="utf-8")
    inside = git(["rev-parse", "--is-inside-work-tree"], path.parent, check=False)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        return ApplyResult("yes", True, message=f"replaced {path} (not a git repository: not committed)")
    message = (
        f"autoresearch: {outcome.skill_name} SKILL.md pass rate {outcome.baseline_pass_rate:.2f} -> "
        f"{outcome.final_pass_rate:.2f} ({outcome.kept} kept, {outcome.discarded} discarded)"
    )
    git(["add", "--", path.name], path.parent)
    git([*user_identity(), "commit", "-q", "--no-verify", "-m", message, "--", path.name], path.parent)
    sha = git(["rev-parse", "HEAD"], path.parent).stdout.strip()
    return ApplyResult("yes", True, sha, f"replaced and committed {path} ({sha[:12]})")

"""The checks of a harness, made before a run folder is created, validated or run. Every problem is one line
`harness.dotted.path: what is wrong (what to do)`.

- `check_harness`: every component glob matches a file, required files exist, and every phase of the schedule has
  at least one editable file.
- `harness_files`: the files those checks look at (HEAD's tracked files for a repository); `harness_source` /
  `HarnessSource`: the git state of `saddler init --harness SOURCE` and what `init` refuses of it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from saddler.config import HarnessConfig, RunConfig
from saddler.errors import ConfigError
from saddler.harness import components
from saddler.harness.gitcmd import git, is_repo_root
from saddler.policies.phases import NONE, make_phase_schedule

_SKIP_DIRS = {".git", "__pycache__"}


def harness_files(harness_dir: Path) -> list[str]:
    """The harness's files: tracked at HEAD for a git repository, else every file below the folder."""
    if (harness_dir / ".git").exists() and is_repo_root(harness_dir):
        head = git(["rev-parse", "--verify", "-q", "HEAD"], harness_dir, check=False)
        if head.returncode == 0:
            out = git(["ls-tree", "-r", "-z", "--name-only", "HEAD"], harness_dir).stdout
            return sorted(p for p in out.split("\0") if p)
    found = []
    for root, dirs, files in os.walk(harness_dir):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        rel = Path(root).relative_to(harness_dir)
        found += [(rel / f).as_posix() for f in files]
    return sorted(found)


@dataclass(frozen=True)
class HarnessSource:
    """What `saddler init --harness SOURCE` finds of SOURCE's git state (SOURCE is only read): whether it is a
    repository's top folder (else a plain folder: its files are committed as the baseline of the run's clone),
    whether that repository has a commit, and its uncommitted files (`saddler.harness.uncommitted`)."""

    path: Path
    repo: bool
    committed: bool
    uncommitted: list[str]

    def problems(self, include_uncommitted: bool = False) -> list[str]:
        """What `init` refuses: a repository without a commit; uncommitted files unless they are included."""
        if self.repo and not self.committed:
            return [f"{self.path} has no commits; commit the harness once before optimizing it"]
        if self.uncommitted and not include_uncommitted:
            return [
                f"{self.path} has {len(self.uncommitted)} uncommitted file(s): {listing(self.uncommitted)}. A run "
                "starts from the last commit, so these would be left out: commit them, or pass "
                "--include-uncommitted to make them part of the run's baseline (your repository is not changed)"
            ]
        return []

    def baseline_files(self, include_uncommitted: bool) -> list[str]:
        """The files the run's baseline commit will hold: HEAD's (with `include_uncommitted`, as the working tree
        has them: new and changed files in, deleted ones out); every file of a plain folder."""
        files = set(harness_files(self.path))
        if self.repo and include_uncommitted:
            for rel in self.uncommitted:
                (files.add if (self.path / rel).is_file() else files.discard)(rel)
        return sorted(files)


def harness_source(source: Path, exclude: Path | None = None) -> HarnessSource:
    """The git state of the harness folder `source`; uncommitted paths inside `exclude` (the run folder being
    made) are not counted."""
    from saddler.harness.uncommitted import uncommitted_files

    source = Path(source)
    if not is_repo_root(source):
        return HarnessSource(source, False, False, [])
    committed = git(["rev-parse", "--verify", "-q", "HEAD"], source, check=False).returncode == 0
    dirty = uncommitted_files(source, exclude=exclude) if committed else []
    return HarnessSource(source, True, committed, dirty)


def listing(files: list[str], limit: int = 20) -> str:
    """`a, b, c and 5 more`: at most `limit` paths named."""
    shown = ", ".join(files[:limit])
    return shown + (f" and {len(files) - limit} more" if len(files) > limit else "")


def check_harness(harness: HarnessConfig, files: list[str], cfg: RunConfig | None) -> list[str]:
    """Globs that match no file, missing required files, and phases (of `cfg`'s schedule, when given) with no
    editable file. Dotted paths under `harness.`."""
    errors: list[str] = []
    comp = harness.components
    for table, key, globs in (
        ("components", "capability", comp.capability),
        ("components", "steering", comp.steering),
        ("components", "protected", comp.protected),
        ("structure", "skill_files", harness.structure.skill_files),
    ):
        for i, pattern in enumerate(globs):
            try:
                hit = any(components.matches(f, [pattern]) for f in files)
            except ConfigError:
                continue  # reported as an invalid glob
            if not hit:
                errors.append(f"harness.{table}.{key}.{i}: {pattern!r} matches no file in the harness")
    errors += [
        f"harness.structure.required_files.{i}: no such file {rel!r} in the harness"
        for i, rel in enumerate(harness.structure.required_files)
        if components.normalize(rel) not in files
    ]
    try:
        kinds = {components.classify(f, comp) for f in files}
    except ConfigError:
        return errors
    phases = _phases(cfg)
    hint = "" if (cfg or RunConfig()).policies.phases == NONE else ', or set run.policies.phases = "none"'

    for phase, allowed in phases:
        if not kinds & set(allowed):
            where = "harness.components." + ("capability" if "capability" in allowed else "steering")
            errors.append(
                f"{where}: no editable file for the {phase} phase (allowed: {', '.join(allowed)}); add globs that "
                f"match files{hint}"
            )
    return errors


def _phases(cfg: RunConfig | None) -> list[tuple[str, tuple[str, ...]]]:
    """(phase, editable kinds) for every phase the run's schedule goes through, in order. The schedule is the
    one the run makes, on a train split of one task: which phases it visits is the same for any non-empty split.
    Without a run config: the schedule of the default one (what `saddler init` makes)."""
    pol = (cfg or RunConfig()).policies
    schedule = make_phase_schedule(
        pol.phases, 1, pol.capability_epochs, pol.steering_allows_capability, pol.phase_transition
    )
    first, last = schedule.phase(0, 0), schedule.phase(math.ceil(schedule.capability_epochs), 1)
    return [(phase, tuple(sorted(schedule.allowed_kinds(phase)))) for phase in dict.fromkeys((first, last))]

"""The second line of defence around every agent session: nothing outside the session's own worktree may change in
the run folder while it runs (the clone's `.git`, other worktrees, `evodag.sqlite`, `sessions/`, `traces/`, the
config), whatever the backend or template and whatever its sandbox let through.

`FolderState.take(run_dir)` records every file's type, size, mode and mtime (and the bytes of the clone's small git
files, which `restore` puts back: a planted hook or config key never outlives the session that wrote it);
`Allowance` says what a session may change: its worktree (but not the worktree's `.git` pointer), its own files in
`sessions/`, its worktree's bookkeeping in the clone's admin entry, new objects, branches and stashes its own git
commands make. The user's own controls (`PAUSE`, `STOP`, a report written meanwhile) are not the agent's.

With several iterations in flight (`loop.parallel_iterations`), or rollouts still landing when a session starts (a
dev race decided before its last rollouts ended), saddler itself writes the run folder while the session runs: the
store, the state file, traces, other sessions' files and worktrees, its own commits. Those places are not recorded
then (`concurrent_writes`): the check still covers the config, the clone's own git files (config, hooks,
HEAD, branches, packed refs) and everything else; what an unsandboxed agent writes into another iteration's
worktree or trace is not seen (the command backend's sandbox hides them: `sessions.sandbox`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

USER_FILES = frozenset(
    {"PAUSE", "STOP", ".lock", "report.md", "report.html", "results.tsv", "progress.png", "evodag.sqlite-shm"}
)
_KEPT_BYTES = 256 * 1024  # git's small files (config, hooks, refs, HEAD) are kept to be put back
_ADMIN_BOOKKEEPING = frozenset({"index", "HEAD", "ORIG_HEAD", "COMMIT_EDITMSG", "AUTO_MERGE", "FETCH_HEAD",
                                "MERGE_HEAD", "MERGE_MSG", "REBASE_HEAD", "index.lock"})  # fmt: skip


@dataclass(frozen=True)
class Allowance:
    """What one session may change, as paths relative to the run folder."""

    worktree: str | None = None  # e.g. `worktrees/it3-a0`: everything in it but its `.git`
    admin: str | None = None  # its entry in the clone, e.g. `harness/.git/worktrees/it3-a0`
    session_prefix: str = ""  # e.g. `sessions/3-diagnosis_patch.`: the session's own files
    git_dir: str = "harness/.git"
    shared: tuple[str, ...] = ()  # what saddler itself changes meanwhile (other iterations in flight): not recorded

    def skips(self, rel: str) -> bool:
        """Paths not even recorded: the worktree's files, the user's files, what saddler changes meanwhile."""
        if rel in USER_FILES or rel.startswith("best/") or any(rel.startswith(p) for p in self.shared):
            return True
        if self.worktree and rel.startswith(self.worktree + "/"):
            return rel != f"{self.worktree}/.git"
        return False

    def allows(self, rel: str, change: str) -> bool:
        """Whether the session may make `change` (`added`, `changed`, `removed`) to `rel`."""
        if self.session_prefix and rel.startswith(self.session_prefix):
            return True
        git = self.git_dir + "/"
        if rel.startswith(git + "objects/") and not rel.startswith(git + "objects/info/"):
            return change == "added"
        if self.admin and rel.startswith(self.admin + "/"):
            name = rel[len(self.admin) + 1 :]
            return name in _ADMIN_BOOKKEEPING or name.startswith("logs/")
        inside = rel[len(git) :] if rel.startswith(git) else ""
        return inside.startswith(("refs/heads/", "logs/refs/heads/", "refs/stash", "logs/refs/stash"))


@dataclass
class FolderState:
    """What a run folder holds (see module docstring)."""

    root: Path
    entries: dict[str, tuple[str, int, int, int]] = field(default_factory=dict)
    kept: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def take(cls, root: Path, allowance: Allowance) -> FolderState:
        state = cls(Path(root))
        git = allowance.git_dir + "/"
        for dirpath, dirnames, filenames in os.walk(root):
            base = Path(dirpath)
            rel_dir = base.relative_to(root).as_posix()
            prefix = "" if rel_dir == "." else rel_dir + "/"
            names = list(filenames)
            if allowance.worktree and allowance.worktree in (prefix + d for d in dirnames):
                dirnames.remove(allowance.worktree[len(prefix) :])  # its files are the session's; its .git is not
                names.append(allowance.worktree[len(prefix) :] + "/.git")
            dirnames[:] = [d for d in dirnames if not allowance.skips(prefix + d + "/")]
            names += [d for d in dirnames if (base / d).is_symlink()]
            for name in names:
                rel = prefix + name
                if allowance.skips(rel):
                    continue
                try:
                    info = os.lstat(base / name)
                except FileNotFoundError:
                    continue
                kind = "l" if stat.S_ISLNK(info.st_mode) else "f"
                state.entries[rel] = (kind, info.st_size, info.st_mtime_ns, info.st_mode)
                small = kind == "f" and info.st_size <= _KEPT_BYTES
                if small and rel.startswith(git) and not rel.startswith(git + "objects/"):
                    with contextlib.suppress(OSError):
                        state.kept[rel] = (base / name).read_bytes()
        return state

    def changes(self, after: FolderState) -> list[tuple[str, str]]:
        """(path, `added` / `changed` / `removed`) from this state to `after`, sorted by path."""
        out = []
        for rel in sorted(set(self.entries) | set(after.entries)):
            old, new = self.entries.get(rel), after.entries.get(rel)
            if old is None:
                out.append((rel, "added"))
            elif new is None:
                out.append((rel, "removed"))
            elif old != new or (rel in self.kept and after.kept.get(rel, self.kept[rel]) != self.kept[rel]):
                out.append((rel, "changed"))
        return out

    def restore(self, changes: list[tuple[str, str]]) -> list[str]:
        """Put back what it can of the clone's git files among `changes` (added ones deleted, changed or removed ones
        rewritten from the recorded bytes); returns the paths it put back."""
        done = []
        for rel, change in changes:
            path = self.root / rel
            try:
                if change == "added" and rel.startswith("harness/.git/") and "/objects/" not in rel:
                    path.unlink()
                elif rel in self.kept:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.unlink(missing_ok=True)
                    path.write_bytes(self.kept[rel])
                    os.chmod(path, self.entries[rel][3] & 0o7777)
                else:
                    continue
            except OSError:
                continue
            done.append(rel)
        return done


def escapes(before: FolderState, after: FolderState, allowance: Allowance) -> list[tuple[str, str]]:
    """The changes from `before` to `after` that `allowance` does not allow."""
    return [(rel, change) for rel, change in before.changes(after) if not allowance.allows(rel, change)]


def concurrent_writes(git_dir: str) -> tuple[str, ...]:
    """The run folder's places saddler writes while a session runs beside other iterations (see the module
    docstring), relative to the run folder (`git_dir`: the clone's, e.g. `harness/.git`)."""
    git = git_dir.rstrip("/") + "/"
    return (
        "evodag.sqlite", "schedule.json", ".schedule.json", "traces/", "heldout/", "worktrees/", "sessions/",
        git + "worktrees/", git + "refs/saddler/", git + "logs/refs/saddler/", git + "objects/",
    )  # fmt: skip

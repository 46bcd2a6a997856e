"""A git diff cut into its changes, and any subset of them joined back into a patch.

`split_hunks` takes the text of `git diff` between two commits (`HarnessSpace.diff`: full index lines, no renames)
and returns one `Hunk` per `@@` hunk of a modified text file, and one whole-file `Hunk` for a file that is new,
deleted, binary or only changes mode (such a file is all or nothing). `join_hunks` writes a subset back as one
patch: each file's header once, its chosen hunks in order. Hunks of one diff never overlap and their context lines
are the old side's, so any subset applies to the diff's old commit (`plumbing.apply_on_index`).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

_FILE = re.compile(r"^diff --git a/(.*) b/(.*)$")


@dataclass(frozen=True)
class Hunk:
    """One change: `file`, the file's diff header (`diff --git` to `+++`), the hunk's text (`@@` line and body; ""
    for a whole-file change, whose header holds everything), `label` (the `@@` line or `new file`, `deleted file`,
    `binary`, `mode`) and `lines` (lines added plus removed)."""

    file: str
    header: str
    body: str
    label: str
    lines: int

    @property
    def patch(self) -> str:
        """This change alone as a patch."""
        return self.header + self.body


def split_hunks(diff: str) -> list[Hunk]:
    """The changes of `diff` in diff order (see the module docstring)."""
    out: list[Hunk] = []
    for section in _sections(diff):
        lines = section.splitlines(keepends=True)
        match = _FILE.match(lines[0].rstrip("\n"))
        path = match.group(2) if match else lines[0].split()[-1]
        first = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
        header, body = "".join(lines[:first]), lines[first:]
        whole = _whole_file_label(header) if first < len(lines) else _whole_file_label(header) or "mode"
        if whole:
            out.append(Hunk(path, section, "", whole, _count(body)))
            continue
        starts = [i for i, line in enumerate(body) if line.startswith("@@")] + [len(body)]
        for a, b in itertools.pairwise(starts):
            text = "".join(body[a:b])
            out.append(Hunk(path, header, text, body[a].split("@@")[1].strip(), _count(body[a:b])))
    return out


def join_hunks(hunks: list[Hunk]) -> str:
    """One patch of `hunks` (taken from one `split_hunks` result, in its order): each file's header once."""
    parts: list[str] = []
    last_header: str | None = None
    for hunk in hunks:
        if hunk.header != last_header or not hunk.body:
            parts.append(hunk.header)
            last_header = hunk.header
        parts.append(hunk.body)
    return "".join(parts)


def _sections(diff: str) -> list[str]:
    sections: list[str] = []
    current: list[str] = []
    for line in diff.splitlines(keepends=True):
        if line.startswith("diff --git ") and current:
            sections.append("".join(current))
            current = []
        current.append(line)
    if current and current[0].startswith("diff --git "):
        sections.append("".join(current))
    return sections


def _whole_file_label(header: str) -> str:
    if "\nGIT binary patch" in header or "\nBinary files " in header:
        return "binary"
    if "\nnew file mode " in header:
        return "new file"
    if "\ndeleted file mode " in header:
        return "deleted file"
    return ""


def _count(body: list[str]) -> int:
    """Lines added plus removed in a hunk body (after its `@@` line: no file header lines there)."""
    return sum(1 for line in body if line[:1] in ("+", "-"))

"""Line-level edits of a SKILL.md that keep everything else byte for byte: the mutator's tools.

Sections are `## ` headings outside fenced code; the frontmatter is never touched by these helpers.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.skill_evals.agent import content_words


@dataclass(frozen=True)
class Section:
    heading: str  # "" for the text before the first H2
    start: int  # index of the heading line (or of the first body line for "")
    end: int  # one past the section's last line


def body_start(lines: list[str]) -> int:
    """Index of the first line after the frontmatter (0 without one)."""
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() == "---":
                return i + 1
    return 0


def sections(lines: list[str]) -> list[Section]:
    """The body's sections in order (the untitled preamble first when it has content)."""
    begin = body_start(lines)
    marks, fenced = [], False
    for i in range(begin, len(lines)):
        stripped = lines[i].strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fenced = not fenced
        elif not fenced and lines[i].startswith("## "):
            marks.append(i)
    out = []
    if not marks or any(lines[j].strip() for j in range(begin, marks[0])):
        out.append(Section("", begin, marks[0] if marks else len(lines)))
    for k, i in enumerate(marks):
        out.append(Section(lines[i][3:].strip(), i, marks[k + 1] if k + 1 < len(marks) else len(lines)))
    return out


def section_of(lines: list[str], index: int) -> Section | None:
    return next((s for s in sections(lines) if s.start <= index < s.end), None)


def content_lines(lines: list[str], sec: Section) -> list[int]:
    """Indexes of the section's non-empty, non-heading lines."""
    first = sec.start + 1 if sec.heading else sec.start
    return [i for i in range(first, sec.end) if lines[i].strip() and not lines[i].startswith("# ")]


def best_section(lines: list[str], cue: set[str]) -> Section | None:
    """The H2 section most relevant to `cue` words: heading overlap first, then text overlap; ties -> first."""
    ranked = []
    for pos, sec in enumerate(s for s in sections(lines) if s.heading):
        text = " ".join(lines[sec.start : sec.end])
        ranked.append((-len(content_words(sec.heading) & cue), -len(content_words(text) & cue), pos, sec))
    return min(ranked, key=lambda r: r[:3])[3] if ranked else None


def insert_in_section(lines: list[str], sec: Section | None, new_line: str, at_top: bool = False) -> list[str]:
    """A copy with `new_line` added at the top or after the last content line of `sec` (end of file if None)."""
    out = list(lines)
    if sec is None:
        while out and not out[-1].strip():
            out.pop()
        return [*out, new_line]
    idx = content_lines(out, sec)
    first, after_last = (idx[0], idx[-1] + 1) if idx else (sec.start + 1, sec.start + 1)
    pos = first if at_top else after_last
    out.insert(pos, new_line)
    return out


def find_line(lines: list[str], needles: list[str], start: int = 0) -> int | None:
    """The first body line (not a heading) containing any needle, case-insensitive."""
    lowered = [n.lower() for n in needles if n]
    for i in range(max(start, body_start(lines)), len(lines)):
        low = lines[i].lower()
        if not lines[i].startswith("#") and any(n in low for n in lowered):
            return i
    return None


def bullet_text(line: str) -> str:
    stripped = line.strip()
    for prefix in ("- ", "* "):
        if stripped.startswith(prefix):
            return stripped[2:].strip()
    return stripped


def as_required(line: str) -> str:
    """The line escalated to a mandatory check item."""
    text = bullet_text(line)
    return f"- **Required:** {text}" if not text.startswith("**Required") else f"- {text}"


def join(lines: list[str], original: str) -> str:
    return "\n".join(lines) + ("\n" if original.endswith("\n") else "")

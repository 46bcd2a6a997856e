"""Structure rules every candidate must pass before it is evaluated (`[harness].structure`).

- `python_compiles`: every changed `.py` file compiles (`compile()` on its source; nothing is imported).
- `skill_files`: for each present file matching these globs, a `---` frontmatter block parses as
  `key: value` lines with non-empty `name` and `description`; every `## ` heading and every `${VAR}`
  reference of the parent's version is still there.
- `required_files`: each path (or glob: at least one match) exists.

Every function returns human-readable problems; an empty list means the rule holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from saddler.config import StructureRules
from saddler.harness.components import glob_regex, matches

ParentText = Callable[[str], str | None]

_KEY_LINE = re.compile(r"^([A-Za-z_][\w.-]*)\s*:(?:\s+(.*))?$")
_VAR_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_GLOB_CHARS = set("*?[")


def check_structure(root: Path, rules: StructureRules, changed: Iterable[str], parent_text: ParentText) -> list[str]:
    """All structure problems of the tree at `root`; `changed` are the paths that differ from the parent,
    `parent_text(path)` is the parent's version of a file (None when the parent lacks it)."""
    problems: list[str] = []
    if rules.python_compiles:
        problems += check_python(root, changed)
    if rules.skill_files:
        for rel in files_matching(root, rules.skill_files):
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
            problems += check_skill_text(rel, text, parent_text(rel))
    problems += check_required(root, rules.required_files)
    return problems


def check_python(root: Path, changed: Iterable[str]) -> list[str]:
    """A problem for each changed, present `.py` file that does not compile."""
    problems = []
    for rel in sorted(set(changed)):
        path = root / rel
        if not rel.endswith(".py") or not path.is_file():
            continue
        source = path.read_bytes()
        try:
            compile(source, rel, "exec", dont_inherit=True)
        except SyntaxError as exc:
            problems.append(f"{rel}:{exc.lineno or 0}: syntax error: {exc.msg}")
        except ValueError as exc:
            problems.append(f"{rel}: cannot compile: {exc}")
    return problems


def parse_frontmatter(text: str) -> tuple[dict[str, str] | None, list[str]]:
    """Parse a leading `---` ... `---` block of `key: value` lines.

    Returns (fields, problems); fields is None when there is no well-formed block. Indented lines and
    `- item` lines continue the previous key (lists, folded text); `#` lines and blank lines are skipped.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return None, ["frontmatter: missing (the file must start with a '---' line)"]
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        return None, ["frontmatter: missing closing '---' line"]
    fields: dict[str, str] = {}
    problems: list[str] = []
    key: str | None = None
    for lineno, line in enumerate(lines[1:end], start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if key is not None and (line[0] in " \t" or line.startswith("- ")):
            fields[key] = (fields[key] + " " + line.strip()).strip()
            continue
        m = _KEY_LINE.match(line)
        if m is None:
            problems.append(f"frontmatter: line {lineno} is not 'key: value': {line.strip()[:60]!r}")
            key = None
            continue
        key, value = m.group(1), _unquote((m.group(2) or "").strip())
        if key in fields:
            problems.append(f"frontmatter: duplicate key {key!r} (line {lineno})")
        fields[key] = "" if value in (">", "|", ">-", "|-") else value
    return (None if problems else fields), problems


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def h2_headings(text: str) -> list[str]:
    """`## ` headings outside fenced code blocks, stripped, in order."""
    found, fenced = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            found.append(line[3:].strip().rstrip("#").strip())
    return found


def var_refs(text: str) -> set[str]:
    """Every `${VAR}` reference in the text."""
    return set(_VAR_REF.findall(text))


def check_skill_text(rel: str, text: str, parent: str | None) -> list[str]:
    """Problems of one SKILL.md-like file, compared with its parent version when there is one."""
    fields, problems = parse_frontmatter(text)
    out = [f"{rel}: {p}" for p in problems]
    if fields is not None:
        out += [f"{rel}: frontmatter: {k!r} is missing or empty" for k in ("name", "description") if not fields.get(k)]
    if parent is not None:
        now = set(h2_headings(text))
        out += [f"{rel}: H2 heading removed: ## {h}" for h in h2_headings(parent) if h not in now]
        out += [f"{rel}: variable reference removed: {v}" for v in sorted(var_refs(parent) - var_refs(text))]
    return out


def check_required(root: Path, required: Iterable[str]) -> list[str]:
    """A problem for each required path (or glob without any match) missing under `root`."""
    problems = []
    for entry in required:
        if _GLOB_CHARS & set(entry):
            if not files_matching(root, [entry]):
                problems.append(f"required file missing: no file matches {entry}")
        elif not (root / entry).exists():
            problems.append(f"required file missing: {entry}")
    return problems


def files_matching(root: Path, patterns: Iterable[str]) -> list[str]:
    """Relative paths of files under `root` (outside `.git`) matching any glob, sorted."""
    pats = list(patterns)
    literal = [p for p in pats if not (_GLOB_CHARS & set(p))]
    if len(literal) == len(pats) and not any((root / p).is_dir() for p in literal):
        return sorted({p for p in literal if (root / p).is_file()})
    for p in pats:
        glob_regex(p)  # compile early: one error, not one per file
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if rel.split("/", 1)[0] == ".git" or not path.is_file():
            continue
        if matches(rel, pats):
            out.append(rel)
    return sorted(out)

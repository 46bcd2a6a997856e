"""Reading generated Python the way a test run and a linter would: syntax, top-level functions, imports, style.

Functions are compared by a normalized form (no whitespace, comments, trailing commas or quote differences), so
a formatter that re-wraps or re-quotes code does not change what a function does, while any real edit does.
"""

from __future__ import annotations

import re
from functools import lru_cache

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

DEF = re.compile(r"^def (\w+)\(", re.M)
IMPORT = re.compile(r"^from ([\w.]+) import ([\w, ]+)$", re.M)
_COMMENT = re.compile(r"#[^\n]*")
_SPACE = re.compile(r"\s+")


@lru_cache(maxsize=4096)
def normalize(code: str) -> str:
    """What a piece of code does, for comparison: comments, whitespace, trailing commas and quote styles dropped."""
    text = _SPACE.sub("", _COMMENT.sub("", code)).replace("'", '"')
    return text.replace(",)", ")").replace(",]", "]").replace(",}", "}")


@lru_cache(maxsize=512)
def syntax_error(text: str, path: str) -> str:
    """'' when `text` compiles, else the error as a test run reports it (`SyntaxError: … (path, line N)`)."""
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{type(exc).__name__}: {exc.msg} ({path}, line {exc.lineno})"
    return ""


@lru_cache(maxsize=512)
def functions(text: str) -> dict[str, str]:
    """Top-level functions of a module: name -> source (from its `def` line to the next top-level line).
    Cached: treat the result as read-only."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    name, body = "", [""]
    for line in [*lines, "<end>"]:
        match = DEF.match(line)
        if name and line and not line[0].isspace():
            out[name] = "\n".join(body)
            name, body = "", []
        if match:
            name, body = match.group(1), [line]
        elif name:
            body.append(line)
    return out


@lru_cache(maxsize=4096)
def imports(text: str) -> tuple[tuple[str, tuple[str, ...], int], ...]:
    """`from X import a, b` lines: (module, names, line number). Cached: a read-only tuple."""
    out = []
    for match in IMPORT.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        out.append((match.group(1), tuple(n.strip() for n in match.group(2).split(",") if n.strip()), line))
    return tuple(out)


def indent_unit(text: str) -> int:
    """The smallest non-zero indentation of a file (0 when nothing is indented)."""
    widths = [len(line) - len(line.lstrip(" ")) for line in text.split("\n") if line.strip()]
    return min((w for w in widths if w), default=0)


def style_violations(
    path: str, text: str, original: str, rules: dict[str, Any], only_changed: bool = True
) -> list[str]:
    """flake8-style findings on the lines of `text` that are not in `original` (every line if not only_changed):
    W291 trailing whitespace, E501 line too long, E111 indentation not a multiple of the unit, W0311 a file
    indented with another unit, Q000 double quotes where the repository uses single ones, E999 syntax errors."""
    out = []
    error = syntax_error(text, path)
    if error:
        out.append(f"{path}:1:1: E999 {error}")
    before = set(original.split("\n")) if only_changed else set()
    unit, limit, quote = rules.get("indent", 4), rules.get("max_line", 0), rules.get("quote", '"')
    found_unit = indent_unit(text)
    if found_unit and found_unit != unit and found_unit != indent_unit(original):
        out.append(f"{path}:1:1: W0311 bad indentation: found {found_unit} spaces, expected {unit}")
    for number, line in enumerate(text.split("\n"), 1):
        if line in before or not line.strip():
            continue
        width = len(line) - len(line.lstrip(" "))
        if line != line.rstrip():
            out.append(f"{path}:{number}:{len(line.rstrip()) + 1}: W291 trailing whitespace")
        if limit and len(line) > limit:
            out.append(f"{path}:{number}:{limit + 1}: E501 line too long ({len(line)} > {limit} characters)")
        if width % unit:
            out.append(f"{path}:{number}:1: E111 indentation is not a multiple of {unit}")
        if quote == "'" and '"' in line.replace('"""', ""):
            out.append(f"{path}:{number}:1: Q000 Double quotes found but single quotes preferred")
    return out

"""The component map: which harness paths are capability, steering or protected.

Globs are relative to the harness root and anchored there. `*` and `?` stay inside one path segment,
`**` spans any number of directories (zero included), a trailing `/` means "everything below", and a
pattern that names a directory also covers every path below it. Protected wins, then capability, then
steering; anything else is `unclassified`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from saddler.config import ComponentMap
from saddler.errors import ConfigError

CAPABILITY, STEERING, PROTECTED, UNCLASSIFIED, MIXED = "capability", "steering", "protected", "unclassified", "mixed"


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a component-map glob into an anchored regex over '/'-separated relative paths
    (`ConfigError` for a malformed character class such as `[z-a]`)."""
    pat = pattern
    while pat.startswith("./"):
        pat = pat[2:]
    pat = pat.lstrip("/")
    if pat.endswith("/"):
        pat += "**"
    parts = pat.split("/")
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]*/)*")
        else:
            out.append(_segment(part) + ("" if last else "/"))
    try:
        return re.compile("".join(out) + "(?:/.*)?", re.DOTALL)
    except re.error as exc:
        raise ConfigError(f"invalid glob {pattern!r}: {exc}; fix it in saddler.toml [harness.components]") from exc


def _segment(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            while i + 1 < len(part) and part[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and "]" in part[i + 2 :]:
            end = part.index("]", i + 2)
            body = part[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\").replace("/", "") + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def matches(path: str, patterns: Iterable[str]) -> bool:
    """True when the relative `path` matches any glob in `patterns`."""
    norm = normalize(path)
    return any(glob_regex(p).fullmatch(norm) for p in patterns)


def normalize(path: str) -> str:
    """A repository-relative path with '/' separators and no leading './'."""
    norm = path.replace("\\", "/")
    while norm.startswith("./"):
        norm = norm[2:]
    return norm.lstrip("/")


def classify(path: str, components: ComponentMap) -> str:
    """capability | steering | protected | unclassified for one path (protected wins)."""
    if matches(path, components.protected):
        return PROTECTED
    if matches(path, components.capability):
        return CAPABILITY
    if matches(path, components.steering):
        return STEERING
    return UNCLASSIFIED


def patch_kind(paths: Iterable[str], components: ComponentMap) -> str:
    """The kind of a change: capability | steering when all classified paths agree, mixed when both
    occur, unclassified when none is classified. Protected paths count as neither (they are rejected
    separately by `protected_paths`)."""
    kinds = {classify(p, components) for p in paths}
    kinds &= {CAPABILITY, STEERING}
    if kinds == {CAPABILITY, STEERING}:
        return MIXED
    return kinds.pop() if kinds else UNCLASSIFIED


def protected_paths(paths: Iterable[str], components: ComponentMap) -> list[str]:
    """The given paths that the component map protects, in input order, without duplicates."""
    seen: dict[str, None] = {}
    for p in paths:
        if classify(p, components) == PROTECTED:
            seen.setdefault(p, None)
    return list(seen)

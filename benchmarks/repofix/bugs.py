"""The bug families of repofix: what each task plants in a repository, how it is fixed, and how it is graded.

A family variant is source text with placeholders (NOUN, PKG, OLD, NEW, HELPER) and, per site, the buggy line,
the accepted fixes, the agent's typical wrong fixes and the hidden fail-to-pass tests that need the site fixed.
Families: off_by_one, edge_case (the reported case and a sibling one), api_misuse (a wrapper called without the
option the caller needs; changing the wrapper's default instead breaks its other callers), wrong_import (a name
moved to another module), multi_file (a settings key renamed, written in two or three modules), flaky_test (an
intermittently failing test whose cause is unordered output in the source).
"""

from __future__ import annotations

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

FAMILIES = ("off_by_one", "edge_case", "api_misuse", "wrong_import", "multi_file", "flaky_test")

OFF_BY_ONE: list[dict[str, Any]] = [
    {
        "func": "window_NOUN",
        "text": '''def window_NOUN(NOUN, size):
    """Every run of `size` consecutive NOUN."""
    if size <= 0:
        return []
    return [NOUN[i : i + size] for i in range(len(NOUN) - size)]
''',
        "buggy": "    return [NOUN[i : i + size] for i in range(len(NOUN) - size)]",
        "fixed": ["    return [NOUN[i : i + size] for i in range(len(NOUN) - size + 1)]"],
        "slip": "    return [NOUN[i : i + size] for i in range(len(NOUN) - size - 1)]",
        "decoy": '''def lookahead_NOUN(NOUN, size):
    """Runs of `size` NOUN that are followed by at least one more."""
    if size <= 0:
        return []
    return [NOUN[i : i + size] for i in range(len(NOUN) - size)]
''',
        "issue": "`window_NOUN([1, 2, 3], 3)` returns `[]` instead of `[[1, 2, 3]]`: the last window is always "
        "missing.",
    },
    {
        "func": "page_count_NOUN",
        "text": '''def page_count_NOUN(total, per_page):
    """How many pages `total` NOUN fill at `per_page` a page."""
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    return total // per_page
''',
        "buggy": "    return total // per_page",
        "fixed": ["    return (total + per_page - 1) // per_page", "    return -(-total // per_page)"],
        "slip": "    return total // per_page + 1",
        "decoy": '''def full_pages_NOUN(total, per_page):
    """How many completely filled pages `total` NOUN make."""
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    return total // per_page
''',
        "issue": "`page_count_NOUN(11, 5)` returns 2, so the 11th item never gets a page.",
    },
    {
        "func": "last_NOUN",
        "text": '''def last_NOUN(NOUN, n):
    """The last n NOUN."""
    if n <= 0:
        return []
    return NOUN[len(NOUN) - n - 1 :]
''',
        "buggy": "    return NOUN[len(NOUN) - n - 1 :]",
        "fixed": ["    return NOUN[len(NOUN) - n :]", "    return NOUN[-n:]"],
        "slip": "    return NOUN[len(NOUN) - n + 1 :]",
        "decoy": '''def tail_with_anchor_NOUN(NOUN, n):
    """The last n NOUN and the one just before them."""
    if n <= 0:
        return []
    return NOUN[len(NOUN) - n - 1 :]
''',
        "issue": "`last_NOUN(values, 2)` returns three values instead of two.",
    },
]

EDGE_CASE: list[dict[str, Any]] = [
    {
        "func": "mean_NOUN",
        "text": '''def mean_NOUN(NOUN):
    """The mean of the NOUN."""
    total = sum(NOUN)
    return total / len(NOUN)
''',
        "buggy": "    total = sum(NOUN)",
        "fixed": ["    if not NOUN:\n        return 0.0\n    total = sum(NOUN)"],
        "partial": "    if len(NOUN) == 0:\n        return 0.0\n    total = sum(NOUN)",
        "decoy": '''def spread_NOUN(NOUN):
    """The total of the NOUN divided by their count, for non-empty input."""
    total = sum(NOUN)
    return max(NOUN) - total / len(NOUN)
''',
        "issue": "`mean_NOUN([])` raises ZeroDivisionError; with no data it should return 0.0.",
        "cases": ("empty", "none"),
    },
    {
        "func": "header_NOUN",
        "text": '''def header_NOUN(lines):
    """The first line of the NOUN block, stripped."""
    first = lines[0]
    return first.strip()
''',
        "buggy": "    first = lines[0]",
        "fixed": ['    if not lines:\n        return ""\n    first = lines[0]'],
        "partial": '    if len(lines) == 0:\n        return ""\n    first = lines[0]',
        "decoy": '''def header_width_NOUN(lines):
    """The width of the first line of a non-empty NOUN block."""
    first = lines[0]
    return len(first)
''',
        "issue": "`header_NOUN([])` raises IndexError; an empty block should give an empty header.",
        "cases": ("empty", "none"),
    },
    {
        "func": "parse_NOUN_count",
        "text": '''def parse_NOUN_count(text):
    """The number in a 'NOUN: N' line."""
    value = text.split(":")[1]
    return int(value)
''',
        "buggy": '    value = text.split(":")[1]',
        "fixed": ['    if not text or ":" not in text:\n        return 0\n    value = text.split(":")[1]'],
        "partial": '    if ":" not in text:\n        return 0\n    value = text.split(":")[1]',
        "decoy": '''def parse_NOUN_label(text):
    """The label after the colon of a 'NOUN: label' line."""
    value = text.split(":")[1]
    return value.strip()
''',
        "issue": "`parse_NOUN_count('NOUN')` (a line without a colon) raises IndexError; it should count 0.",
        "cases": ("no_colon", "none"),
    },
]

API_MISUSE: list[dict[str, Any]] = [
    {
        "helper_func": "format_stamp",
        "helper": '''def format_stamp(value, fmt, utc=False):
    """Format a datetime, converted to UTC when utc is true."""
    if utc:
        value = value.astimezone(timezone.utc)
    return value.strftime(fmt)
''',
        "helper_import": "from datetime import timezone",
        "helper_def": "def format_stamp(value, fmt, utc=False):",
        "helper_overbroad": "def format_stamp(value, fmt, utc=True):",
        "func": "export_NOUN_line",
        "text": '''def export_NOUN_line(NOUN, when):
    """One export line: the number of NOUN and when they were taken (UTC, as the importer expects)."""
    stamp = format_stamp(when, "%Y-%m-%dT%H:%M:%SZ")
    return stamp + " " + str(len(NOUN))
''',
        "buggy": '    stamp = format_stamp(when, "%Y-%m-%dT%H:%M:%SZ")',
        "fixed": ['    stamp = format_stamp(when, "%Y-%m-%dT%H:%M:%SZ", utc=True)'],
        "slip": '    stamp = format_stamp(when.utcnow(), "%Y-%m-%dT%H:%M:%SZ")',
        "decoy": '''def display_NOUN_line(NOUN, when):
    """One display line in the user's local time."""
    stamp = format_stamp(when, "%Y-%m-%dT%H:%M:%SZ")
    return stamp + " " + str(len(NOUN))
''',
        "issue": "Export lines written by `export_NOUN_line` carry local time although they end in `Z`; the "
        "importer reads them as UTC and shifts every record.",
    },
    {
        "helper_func": "rank",
        "helper": '''def rank(values, descending=False):
    """The values in order, largest first when descending is true."""
    return sorted(values, reverse=descending)
''',
        "helper_import": "",
        "helper_def": "def rank(values, descending=False):",
        "helper_overbroad": "def rank(values, descending=True):",
        "func": "top_NOUN",
        "text": '''def top_NOUN(NOUN, n=3):
    """The n largest NOUN, largest first."""
    ranked = rank(NOUN)
    return ranked[:n]
''',
        "buggy": "    ranked = rank(NOUN)",
        "fixed": ["    ranked = rank(NOUN, descending=True)"],
        "slip": "    ranked = rank(NOUN)[::-1][::-1]",
        "decoy": '''def bottom_NOUN(NOUN, n=3):
    """The n smallest NOUN, smallest first."""
    ranked = rank(NOUN)
    return ranked[:n]
''',
        "issue": "`top_NOUN([3, 9, 4], 1)` returns `[3]`: it gives the smallest values, not the largest.",
    },
    {
        "helper_func": "read_rows",
        "helper": '''def read_rows(text, skip_header=False):
    """The comma-separated rows of text, without the first line when skip_header is true."""
    lines = text.splitlines()
    if skip_header:
        lines = lines[1:]
    return [line.split(",") for line in lines if line]
''',
        "helper_import": "",
        "helper_def": "def read_rows(text, skip_header=False):",
        "helper_overbroad": "def read_rows(text, skip_header=True):",
        "func": "import_NOUN",
        "text": '''def import_NOUN(text):
    """The NOUN of an exported CSV file (the export writes a header line)."""
    rows = read_rows(text)
    return [row[0] for row in rows]
''',
        "buggy": "    rows = read_rows(text)",
        "fixed": ["    rows = read_rows(text, skip_header=True)"],
        "slip": "    rows = read_rows(text.strip())",
        "decoy": '''def import_raw_NOUN(text):
    """The NOUN of a headerless CSV dump."""
    rows = read_rows(text)
    return [row[0] for row in rows]
''',
        "issue": "`import_NOUN` returns the header text as the first entry.",
    },
]

WRONG_IMPORT: list[dict[str, Any]] = [
    {"symbol": "normalize_NOUN", "old": "compat", "stale": "helpers"},
    {"symbol": "coerce_NOUN", "old": "legacy", "stale": "shims"},
]
WRONG_IMPORT_DEF = '''def SYMBOL(NOUN):
    """The NOUN with surrounding blanks removed and empty ones dropped."""
    return [str(x).strip() for x in NOUN if str(x).strip()]
'''
WRONG_IMPORT_USER = '''def tidy_NOUN(NOUN):
    """The NOUN, normalized for storage."""
    return SYMBOL(NOUN)
'''

MULTI_FILE: list[dict[str, Any]] = [
    {"old": "retries", "new": "max_retries", "value": "3"},
    {"old": "timeout", "new": "timeout_s", "value": "30"},
    {"old": "page_size", "new": "per_page", "value": "50"},
]
MULTI_WRITER = '''def apply_WHERE_settings(settings, value):
    """Store the WHERE value of the `NEW` setting."""
    settings["OLD"] = value
    return settings
'''
MULTI_READER = '''def read_NEW(settings):
    """The `NEW` setting, with its default."""
    return settings.get("NEW", VALUE)
'''

FLAKY: list[dict[str, Any]] = [
    {
        "func": "summary_NOUN",
        "text": '''def summary_NOUN(NOUN):
    """One line naming every kind of NOUN."""
    kinds = set(item["kind"] for item in NOUN)
    return ", ".join(kinds)
''',
        "buggy": '    return ", ".join(kinds)',
        "fixed": ['    return ", ".join(sorted(kinds))'],
        "slip": '    return ", ".join(list(kinds))',
    },
    {
        "func": "kinds_NOUN",
        "text": '''def kinds_NOUN(NOUN):
    """The distinct kinds of NOUN, as a list."""
    seen = {item["kind"] for item in NOUN}
    return list(seen)
''',
        "buggy": "    return list(seen)",
        "fixed": ["    return sorted(seen)"],
        "slip": "    return list(set(seen))",
    },
]
FLAKY_ISSUE = "`TEST` fails intermittently on CI (about one run in three) with an assertion on the order of kinds."

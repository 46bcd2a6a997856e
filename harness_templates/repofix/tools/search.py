"""Search tool: find a text in the repository."""

from benchmarks.repofix.sdk import tool

LIMIT = 10


@tool("search_code", "Search the code for a text and list the matching lines as path:line:text.")
def search_code(ws, pattern):
    hits = ws.grep(pattern)
    rows = [f"{path}:{line}:{text}" for path, line, text in _ranked(hits)[:LIMIT]]
    if len(hits) > LIMIT:
        rows.append(f"({len(hits) - LIMIT} more matches not shown)")
    return "\n".join(rows) or f"no match for {pattern!r}"


def _ranked(hits):
    """The order the matches are listed in."""
    return hits

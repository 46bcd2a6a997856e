"""Keep the strategy tables in README.md and docs/strategies.md equal to what the records print.

A region of a page between

    <!-- strategy-tables: bench/records/strategies-<fingerprint>.jsonl PART -->
    <!-- /strategy-tables -->

holds what `bench/strategies.py --from <that file> --markdown` prints (PART `all`), or only its summary table
(`summary`) or its table of the default's other bars (`bars`). The records file is named relative to the
repository. Nothing else of the page is touched, so the prose around a table stays the author's.

Usage: python bench/strategy_docs.py           rewrite every region from its records
       python bench/strategy_docs.py --check   exit 1 naming each page whose tables differ from its records
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import strategy_markdown
import strategy_records
from strategies import results_of
from strategy_table import CELLS, GEPA, STRATEGIES

REPO = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/strategies.md")
PARTS = ("all", "summary", "bars")
_REGION = re.compile(
    r"(?P<open><!-- strategy-tables: (?P<records>\S+) (?P<part>\S+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /strategy-tables -->)",
    re.DOTALL,
)
_OPENING = re.compile(r"<!-- strategy-tables: ")


class DocsError(Exception):
    """A page's region cannot be written; the message names the page and what to fix."""


def tables(records: Path, part: str, iterations: int = 30) -> list[str]:
    """The lines `part` of the tables of `records`: every cell, and every strategy the records hold (the bench's
    today in its order, then any it no longer has), each as it was defined when recorded. A records file is the
    history of one code version, so a strategy redefined since keeps its row on the page of that sweep; a strategy
    recorded with two definitions in one file is refused."""
    if part not in PARTS:
        raise DocsError(f"unknown part {part!r}; choose from {', '.join(PARTS)}")
    try:
        recorded = strategy_records.load([records])
        definitions: dict[str, dict[str, object]] = {}
        for record in recorded:
            defined = {k: v for k, v in record.overrides.items() if k != "sessions"}
            if definitions.setdefault(record.strategy, defined) != defined:
                raise DocsError(f"{records}: {record.strategy} was recorded with two definitions")
        names = [*STRATEGIES, *GEPA]
        names += sorted(n for n in definitions if n not in names)
        results = results_of(recorded, list(CELLS), names, iterations, definitions)
    except strategy_records.RecordsError as exc:
        raise DocsError(str(exc)) from exc
    if part == "summary":
        return strategy_markdown.summary_table(results)
    if part == "bars":
        return strategy_markdown.bars_table(results)
    return strategy_markdown.markdown(results)


def rewrite(text: str, page: str, root: Path = REPO) -> str:
    """`text` with every region's body replaced by its tables (records named relative to `root`)."""
    regions = list(_REGION.finditer(text))
    if len(regions) != len(_OPENING.findall(text)):
        raise DocsError(f"{page}: a strategy-tables region is not closed by <!-- /strategy-tables -->")

    def body(match: re.Match[str]) -> str:
        records = root / match["records"]
        try:
            lines = tables(records, match["part"])
        except DocsError as exc:
            raise DocsError(f"{page}: {exc}") from exc
        return f"{match['open']}\n" + "\n".join(lines) + f"\n\n{match['close']}"

    return _REGION.sub(body, text)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is out of date")
    args = parser.parse_args()
    stale = []
    try:
        for page in PAGES:
            path = REPO / page
            text = path.read_text(encoding="utf-8")
            new = rewrite(text, page)
            if new != text:
                stale.append(page)
                if not args.check:
                    path.write_text(new, encoding="utf-8")
    except DocsError as exc:
        parser.exit(2, f"strategy_docs: {exc}\n")
    verb = "out of date" if args.check else "rewritten"
    for page in stale:
        print(f"{verb}: {page}")
    if args.check and stale:
        parser.exit(1, "strategy_docs: run python bench/strategy_docs.py to write the tables from the records\n")


if __name__ == "__main__":
    main()

"""results.tsv of a fleet, in the 002 seed's columns: `commit  metric  status  description` (tab-separated).

status: keep | discard | crash. Plateau = trailing discards (crashes count too), counted here, in code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HEADER = "commit\tmetric\tstatus\tdescription"
STATUSES = ("keep", "discard", "crash")


@dataclass(frozen=True)
class ResultRow:
    commit: str
    metric: float
    status: str
    description: str

    def line(self) -> str:
        text = " ".join(self.description.replace("\t", " ").split())
        return f"{self.commit}\t{self.metric:.6f}\t{self.status}\t{text}"


def ensure_results(path: Path) -> None:
    """Create the file with its header when absent."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEADER + "\n", encoding="utf-8")


def read_results(path: Path) -> list[ResultRow]:
    """Every well-formed row (header and malformed lines skipped)."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[2] not in STATUSES:
            continue
        try:
            metric = float(parts[1])
        except ValueError:
            continue
        rows.append(ResultRow(parts[0], metric, parts[2], parts[3] if len(parts) > 3 else ""))
    return rows


def append_result(path: Path, row: ResultRow) -> None:
    ensure_results(path)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(row.line() + "\n")


def trailing_discards(rows: list[ResultRow]) -> int:
    """Discards (and crashes) at the end of the log since the last keep."""
    count = 0
    for row in reversed(rows):
        if row.status == "keep":
            break
        count += 1
    return count


def best_metric(rows: list[ResultRow], direction: str) -> float | None:
    kept = [r.metric for r in rows if r.status == "keep"]
    if not kept:
        return None
    return min(kept) if direction == "minimize" else max(kept)

"""results.tsv of a fleet, in the 002 seed's columns: `commit  metric  status  description` (tab-separated).

status: keep | discard | crash. Plateau = trailing discards (crashes count too), counted here, in code.

The orchestrator's own measurement is the record: every row it writes is also a `fleet.result` event in the
fleet's EvoDAG (`recorded`). A row of the file that matches none of them was written by someone else (the agent
reporting its own result): `results_of` shows it apart, and nothing counts it (best, keeps, plateau, prompts).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from evodag.decisions import ACCEPTED, TSV_STATUS, trailing_stalls
from evodag.store import EvoDAG
from saddler.policies.seed_acceptance import Direction, MetricKeep

RESULT_EVENT = "fleet.result"

HEADER = "commit\tmetric\tstatus\tdescription"
STATUSES = tuple(TSV_STATUS)


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


def parse_line(line: str) -> ResultRow | None:
    """One results.tsv line as a row, or None (the header, a malformed line)."""
    parts = line.split("\t")
    if len(parts) < 3 or parts[2] not in STATUSES:
        return None
    try:
        metric = float(parts[1])
    except ValueError:
        return None
    return ResultRow(parts[0], metric, parts[2], parts[3] if len(parts) > 3 else "")


def read_results(path: Path) -> list[ResultRow]:
    """Every well-formed row of the file (header and malformed lines skipped), whoever wrote it."""
    if not path.is_file():
        return []
    return [row for line in path.read_text(encoding="utf-8").splitlines() if (row := parse_line(line))]


def recorded(store: EvoDAG) -> list[ResultRow]:
    """The rows the orchestrator wrote, in order: its `fleet.result` events."""
    return [row for e in store.events(kind=RESULT_EVENT) if (row := parse_line(str(e.payload.get("line", ""))))]


def unrecorded(rows: list[ResultRow], record: list[ResultRow]) -> list[ResultRow]:
    """The rows of `rows` (the file) that no row of `record` accounts for, each recorded row matching one."""
    left = Counter(r.line() for r in record)
    out = []
    for row in rows:
        if left[row.line()]:
            left[row.line()] -= 1
        else:
            out.append(row)
    return out


def results_of(db: Path, results: Path) -> tuple[list[ResultRow], list[ResultRow]]:
    """(the orchestrator's rows, the rows of the results file it did not write); no store yet: none recorded."""
    record: list[ResultRow] = []
    if db.is_file():
        with EvoDAG(db, readonly=True) as store:
            record = recorded(store)
    return record, unrecorded(read_results(results), record)


def append_result(path: Path, row: ResultRow) -> None:
    ensure_results(path)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(row.line() + "\n")


def trailing_discards(rows: list[ResultRow]) -> int:
    """Discards (and crashes) at the end of the log since the last keep (`evodag.decisions.stall_after`)."""
    return trailing_stalls(TSV_STATUS[row.status] for row in rows)


def best_metric(rows: list[ResultRow], direction: Direction) -> float | None:
    """The best metric of the kept rows in `direction` (None before any)."""
    return MetricKeep(direction).best(r.metric for r in rows if TSV_STATUS[r.status] == ACCEPTED)

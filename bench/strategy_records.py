"""Per-seed results of `bench/strategies.py` kept as JSON lines, so a sweep too long for one sitting can be run in
shards (`--first-seed N --seeds K`, on any machine, any day) and reported as one (`--from FILE ...`).

A record is one strategy on one seed of one cell: its figures (`SeedResult`), the overrides and iteration count it
ran with, and the **fingerprint** of the code that produced it: a hash of every file of `saddler/`, `evodag/`,
`benchmarks/` and the bench's measuring modules, read from the folders actually imported. Records combine only when
every fingerprint, the strategy definitions and the iteration count agree: a shard measured on other code is a
different experiment, and the report refuses to mix it in. Two records of the same run (same cell, strategy, seed)
must agree on every figure (same seed and config give the same DAG offline); a disagreement is a determinism
defect and is reported, never averaged away.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strategy_runs import SeedResult
from strategy_table import GEPA

MEASURING = ("strategy_runs.py", "gepa_strategy.py", "gepa_adapter.py", "inprocess.py")  # bench code shaping a figure
VOLATILE = ("wall_s",)  # figures that differ between two executions of the same run


class RecordsError(Exception):
    """The records cannot be combined into one report; the message says which and what to do."""


@dataclass(frozen=True)
class Record:
    """One strategy on one seed of one cell (`<benchmark>.<proposer>`), with what it ran with."""

    fingerprint: str
    cell: str
    strategy: str
    overrides: dict[str, Any]
    iterations: int
    result: SeedResult

    @property
    def key(self) -> tuple[str, str, int]:
        return self.cell, self.strategy, self.result.seed

    def to_json(self) -> str:
        row = dataclasses.asdict(self)
        return json.dumps(row, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Record:
        row = json.loads(line)
        fields = row.pop("result")
        fields["origins"] = [tuple(o) for o in fields.get("origins", [])]
        return cls(result=SeedResult(**fields), **row)


def fingerprint() -> str:
    """Hash of the code that decides a strategy's figures: the packages as imported and the measuring modules."""
    import benchmarks
    import evodag
    import saddler

    bench = Path(__file__).resolve().parent
    # a package seen as a namespace (no __file__: a test folder of the same name came first) is the bench's sibling
    roots = [
        Path(m.__file__).resolve().parent if m.__file__ else bench.parent / m.__name__
        for m in (saddler, evodag, benchmarks)
    ]
    return code_digest(roots, [bench / name for name in MEASURING])


def code_digest(roots: list[Path], files: list[Path]) -> str:
    """16 hex digits over the names and bytes of every file under `roots` (caches left out) and of `files`."""
    named = [(f"{r.name}/{p.relative_to(r).as_posix()}", p) for r in roots for p in sorted(r.rglob("*")) if _counts(p)]
    named += [(f"{f.parent.name}/{f.name}", f) for f in files if f.exists()]
    digest = hashlib.sha256()
    for name, path in named:
        digest.update(f"{name}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _counts(path: Path) -> bool:
    return path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"


def append(path: Path, record: Record) -> bool:
    """Add one record at the end of `path` (created with its folder), flushed before returning; True if written.
    A run `path` already holds with the same figures (a `--reuse` sweep re-measuring it) adds no line and returns
    False; with other figures it raises `RecordsError` at once, so a sweep stops on a determinism defect instead of
    recording hours of runs the report will refuse."""
    earlier = {r.key: r for r in load([path])} if path.exists() else {}
    if record.key in earlier:
        _same_run(earlier[record.key], record, f"{path}")
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(record.to_json() + "\n")
        out.flush()
    return True


def load(paths: Iterable[Path]) -> list[Record]:
    """Every record of `paths`, one per run: a run recorded twice with the same figures counts once."""
    seen: dict[tuple[str, str, int], Record] = {}
    for path in paths:
        if not path.exists():
            raise RecordsError(f"{path}: no such records file; give the file(s) --record wrote")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = Record.from_json(line)
            except (ValueError, TypeError, KeyError) as exc:
                raise RecordsError(f"{path}:{number}: not a strategies record ({exc})") from exc
            if record.key in seen:
                _same_run(seen[record.key], record, f"{path}:{number}")
            seen.setdefault(record.key, record)
    return list(seen.values())


def _same_run(earlier: Record, record: Record, where: str) -> None:
    """Raise `RecordsError` unless two records of one run agree on every figure but the volatile ones."""
    if _figures(earlier) != _figures(record):
        raise RecordsError(
            f"{where}: {'/'.join(map(str, record.key))} was recorded before with other figures; "
            "the same seed and config must give the same run offline (a determinism defect to fix first)"
        )


def check_combinable(records: list[Record], strategies: dict[str, dict[str, Any]], iterations: int) -> None:
    """Raise `RecordsError` unless every record was made by the same code, with the iteration count given and the
    overrides each strategy has today (`strategies` maps a name to its overrides without the proposer)."""
    prints = sorted({r.fingerprint for r in records})
    if len(prints) > 1:
        raise RecordsError(
            f"the records come from {len(prints)} versions of the code ({', '.join(prints)}); report each version "
            "apart, or rerun the older shards on this code"
        )
    for record in records:
        wanted = strategies.get(record.strategy)
        if wanted is not None and {k: v for k, v in record.overrides.items() if k != "sessions"} != wanted:
            raise RecordsError(
                f"{record.strategy} was recorded with {record.overrides}, today it is {wanted}; rerun its shards"
            )
        if record.iterations != iterations:
            raise RecordsError(f"{'/'.join(map(str, record.key))} ran {record.iterations} iterations, not {iterations}")


Gaps = dict[tuple[str, str], list[int]]  # (cell, strategy) -> the seeds no record holds


def missing(records: list[Record], cells: list[str], names: list[str], seeds: Iterable[int]) -> Gaps:
    """Per (cell, strategy) of `cells` x `names`, the seeds of `seeds` no record holds (every pair, even if none)."""
    have = {r.key for r in records}
    wanted = list(seeds)
    return {(c, n): [s for s in wanted if (c, n, s) not in have] for c in cells for n in names}


def todo_lines(records: list[Record], cells: list[str], names: list[str], seeds: range, path: Path) -> list[str]:
    """What the records of `path` lack of `cells` x `names` x `seeds`: a `todo` line per strategy with missing seeds,
    the count, and one shard command per cell and span of seeds missing the same strategies (with `full` where a
    GEPA strategy is missing, since GEPA's budget is the default's run of the same seed). A shard must run on the
    code that made the records: the fingerprint line says whether this checkout is that code."""
    gaps = missing(records, cells, names, seeds)
    out = [f"todo {c} {n}: seeds {spans_of(gap)}" for (c, n), gap in gaps.items() if gap]
    out.append(f"todo_runs: {sum(len(g) for g in gaps.values())}  (of {len(cells) * len(names) * len(seeds)} asked)")
    for cell in cells:
        bench, proposer = cell.split(".")
        spans: list[tuple[list[int], list[str]]] = []
        for seed in seeds:
            lacking = [n for n in names if seed in gaps[(cell, n)]]
            if any(n in GEPA for n in lacking) and "full" not in lacking:
                lacking = ["full", *lacking]
            if spans and spans[-1][1] == lacking and spans[-1][0][-1] == seed - 1:
                spans[-1][0].append(seed)
            elif lacking:
                spans.append(([seed], lacking))
        out += [
            f"todo_command: python bench/strategies.py --benchmarks {bench} --proposers {proposer} --first-seed "
            f"{span[0]} --seeds {len(span)} --only {','.join(lacking)} --jobs 2 --reuse --out DIR --record {path}"
            for span, lacking in spans
        ]
    here = fingerprint()
    for made in sorted({r.fingerprint for r in records}):
        advice = (
            "the same code" if made == here else "other code: run the shards in a worktree of the commit that made them"
        )
        out.append(f"todo_fingerprint: {made}  (this checkout: {here}, {advice})")
    return out


def spans_of(seeds: list[int]) -> str:
    """`0-9, 12` for the seeds 0..9 and 12."""
    spans: list[list[int]] = []
    for seed in seeds:
        if spans and seed == spans[-1][1] + 1:
            spans[-1][1] = seed
        else:
            spans.append([seed, seed])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


def _figures(record: Record) -> dict[str, Any]:
    row = dataclasses.asdict(record)
    for name in VOLATILE:
        row["result"].pop(name, None)
    return row

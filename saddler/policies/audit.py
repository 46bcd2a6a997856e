"""The cheat audit (`policies.audit`): an LLM optimizer special-cases what it sees, so every candidate is checked.

A candidate's diff (its added lines, a line moved within a file not counted) must not contain:
- a train, dev or test task id, or a string the benchmark names for a task (`BenchmarkBase.audit_strings`: expected
  answers, graded values) or for itself (grader messages, evaluation file names);
- a path into the benchmark's own code (its module and folder) or the run folder's records (held-out traces, the
  store), or a protected path of the component map;
- a network endpoint (a URL, an IPv4 address, a host name under a common top-level domain).
And the task agent's rollouts on the candidate must not read an evaluation or protected file where the benchmark
records reads (`BenchmarkBase.trace_reads`).

Each hit is a `Hit` whose `reason` is what a session may read: a held-out (dev or test) task's id or string is
never quoted — the reason says "a held-out task's id" — so the audit may read held-out data (it is saddler, not
a session) without ever showing it. `refuse` (the default) makes a hit an invalid candidate, `warn` keeps the
candidate and marks it, `off` checks nothing.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from saddler.benchmark import AuditString, Benchmark, RolloutResult, Task

AUDIT_MODES = ("refuse", "warn", "off")
SUSPECT = "suspect"  # the word that marks an audited node's reason
AUDIT_EVENT = "audit.suspect"  # the event that records a hit (node_id, iteration, where, reason, refused)
MIN_CHARS = 6  # shorter strings ("12", "10:30") are too common to say anything
HELD_OUT = ("dev", "test")
RUN_RECORDS = ("heldout/", "evodag.sqlite", "evodag-view.sqlite")  # the run folder's held-out traces and stores
_TLDS = "com|net|org|io|ai|dev|app|co|cloud|xyz|info|biz|gov|edu|me|us|uk|de|fr|cn|ru|jp|sh|gg|ly|to|ws"
_NETWORK = re.compile(
    r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>)\]]+"  # a URL
    r"|(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.])"  # an IPv4 address
    rf"|(?<![\w.@-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:{_TLDS})(?![\w.-])",  # a host name
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Hit:
    """One audit finding: `kind` (task_id | answer | grader | path | network | trace_read) and `reason`, the
    sentence a session may be shown (no held-out id or string in it)."""

    kind: str
    reason: str


def suspect_reason(hits: Sequence[Hit]) -> str:
    """`suspect: <reason>; <reason>` (each reason once), the mark of an audited node; '' without hits."""
    reasons = list(dict.fromkeys(h.reason for h in hits))
    return f"{SUSPECT}: " + "; ".join(reasons) if reasons else ""


def added_lines(diff: str) -> list[tuple[str, str]]:
    """(file, line) of each line a unified diff adds, less the lines it removes from the same file (a moved or
    re-indented line says nothing new)."""
    added: list[tuple[str, str]] = []
    removed: Counter[tuple[str, str]] = Counter()
    path = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:].removeprefix("b/")
        elif line.startswith("--- ") or line.startswith("@@") or line.startswith("diff --git"):
            continue
        elif line.startswith("+"):
            added.append((path, line[1:]))
        elif line.startswith("-"):
            removed[(path, line[1:].strip())] += 1
    out = []
    for file, text in added:
        if removed[(file, text.strip())]:
            removed[(file, text.strip())] -= 1
        else:
            out.append((file, text))
    return out


@dataclass(frozen=True)
class _Needle:
    text: str
    kind: str
    what: str
    task_id: str
    split: str  # '' for the benchmark's own strings


class Auditor:
    """The audit of one run: built once from the benchmark, its tasks of every split and the protected globs."""

    def __init__(self, benchmark: Benchmark, tasks: dict[str, list[Task]], protected: Iterable[str] = ()) -> None:
        self.benchmark = benchmark
        split_of = {t.id: split for split, ts in tasks.items() for t in ts}
        needles: dict[str, _Needle] = {}

        def add(needle: _Needle) -> None:
            held = needles.get(needle.text)
            if len(needle.text) >= MIN_CHARS and (held is None or held.split in HELD_OUT):
                needles[needle.text] = needle  # a string a train task shares is quoted as the train task's

        for task_id, split in split_of.items():
            add(_Needle(task_id, "task_id", "task id", task_id, split))
        strings: list[AuditString] = list(getattr(benchmark, "audit_strings", lambda _t: [])(list(_all(tasks))))
        for s in strings:
            kind = "answer" if s.task_id else "grader" if "grader" in s.what else "path"
            add(_Needle(s.text.strip(), kind, s.what, s.task_id, split_of.get(s.task_id, "test" if s.task_id else "")))
        for text in _evaluation_paths(benchmark) + [g for g in protected if not any(c in g for c in "*?[")]:
            add(_Needle(text, "path", "evaluation or protected file", "", ""))
        self.needles = needles
        self.protected = list(protected)
        ordered = sorted(needles, key=len, reverse=True)
        self._pattern = re.compile("|".join(_bounded(t) for t in ordered)) if ordered else None

    def diff_hits(self, diff: str) -> list[Hit]:
        """What the diff adds that it must not (see the module docstring), one hit per finding and file."""
        hits: list[Hit] = []
        for file, line in added_lines(diff):
            for match in self._pattern.finditer(line) if self._pattern else ():
                hits.append(self._hit(self.needles[match.group(0)], file))
            for match in _NETWORK.finditer(line):
                hits.append(Hit("network", f"the diff adds a network endpoint ({match.group(0)[:80]}) in {file}"))
        return list(dict.fromkeys(hits))

    def trace_hits(self, results: Iterable[tuple[str, RolloutResult]]) -> list[Hit]:
        """Reads of evaluation or protected files in the rollouts `results` ((split, result) pairs) record."""
        reads: Callable[[RolloutResult], list[str]] = getattr(self.benchmark, "trace_reads", lambda _r: [])
        hits = []
        for split, result in results:
            whose = f"train task {result.task_id}'s" if split == "train" else "a held-out task's"
            for path in reads(result):
                hits.append(Hit("trace_read", f"the task agent's harness code read {path} in {whose} rollout"))
        return list(dict.fromkeys(hits))

    @staticmethod
    def _hit(needle: _Needle, file: str) -> Hit:
        if needle.split in HELD_OUT:
            what = "id" if needle.kind == "task_id" else f"{needle.what} string"
            return Hit(needle.kind, f"the diff hard-codes a held-out task's {what} in {file}")
        if needle.kind == "task_id":
            return Hit("task_id", f"the diff hard-codes the {needle.split} task id {needle.text!r} in {file}")
        if needle.task_id:
            return Hit(
                needle.kind, f"the diff hard-codes {needle.task_id}'s {needle.what} {needle.text[:60]!r} in {file}"
            )
        return Hit(needle.kind, f"the diff names a benchmark {needle.what} {needle.text[:60]!r} in {file}")


def _bounded(text: str) -> str:
    """`text` as a regex matching it whole: not inside a longer word, id, name or dotted path (the benchmark's
    package `benchmarks.opsdesk` is not named by `benchmarks.opsdesk.sdk`, the harness's own SDK)."""
    before = r"(?<![\w-])" if re.match(r"\w", text) else ""
    after = r"(?![\w-]|[./]\w)" if re.match(r".*\w$", text, re.S) else ""
    return before + re.escape(text) + after


def _all(tasks: dict[str, list[Task]]) -> Iterable[Task]:
    for split in tasks:
        yield from tasks[split]


def _evaluation_paths(benchmark: object) -> list[str]:
    """The benchmark's own module and its folder, as a diff could name them, and the run folder's records (its
    other files it names itself: `BenchmarkBase.audit_strings`)."""
    module = type(benchmark).__module__
    names = [module, module.replace(".", "/")]
    source = getattr(sys.modules.get(module), "__file__", None)
    if source:
        names.append(str(Path(source).resolve().parent))
    return [n for n in names if n not in ("benchmarks", "__main__")] + list(RUN_RECORDS)

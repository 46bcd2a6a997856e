"""The shared runtime of the bundled simulated benchmarks (opsdesk, repofix): what does not depend on the domain.

- JSON-lines traces, symptoms and result fields, source digests;
- the patch bank files (`patch_bank/*.patch` + `bank.json`);
- `SimBenchmark`: the `saddler.benchmark.Benchmark` members every simulated benchmark implements the same way;
- the standalone runner's command line.

Loading a harness folder and finding the harness file at fault is in `benchmarks.simharness`; watching which
benchmark files harness code opens is in `benchmarks.simwatch`; what the models and tasks share is in
`benchmarks.simmodel`. Rollout children import this module: it imports only the stdlib at run time.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path
    from typing import Any

    from benchmarks.simmodel import Grade
    from saddler.benchmark import AuditString, BankPatch, RolloutNeeds, RolloutResult, Symptom, Task

SPLITS = ("train", "dev", "test")


# traces and digests --------------------------------------------------------------------------------------------


def read_trace(path: str) -> list[dict[str, Any]]:
    """The events of a JSON-lines trace."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh.read().splitlines() if line.strip()]


def write_trace(trace_dir: str | os.PathLike[str], name: str, events: list[dict[str, Any]]) -> tuple[str, str]:
    """Write `events` as JSON lines to `trace_dir/name`; (its absolute path, the text written)."""
    os.makedirs(trace_dir, exist_ok=True)
    path = os.path.join(os.path.abspath(trace_dir), name)
    text = "\n".join(json.dumps(e, default=str) for e in events) + "\n"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path, text


def source_digest(here: str, names: Iterable[str]) -> str:
    """sha256 (16 hex) over each file's name and bytes, in order (names relative to `here`)."""
    import hashlib

    h = hashlib.sha256()
    for name in names:
        h.update(name.encode())
        with open(os.path.join(here, name), "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:16]


def symptoms_of(events: list[dict[str, Any]], raw: list[tuple[str, str | None, str]]) -> list[Symptom]:
    """`raw` (code, file, detail) tuples as `Symptom`s of the trace's task."""
    from saddler.benchmark import Symptom

    task_id = next((e["task_id"] for e in events if e["type"] == "task"), "")
    return [Symptom(code=c, task_id=task_id, file=f, detail=d) for c, f, d in raw]


def result_fields(
    task_id: str, grade: Grade, disposition: str, error_tail: str, failure_file: str | None
) -> dict[str, Any]:
    """The grade-dependent `RolloutResult` fields: a harness fault scores 0, a pass needs a clean disposition,
    a failure's rationale is the harness error or the grader's."""
    passed = grade.passed and disposition == "success"
    if disposition == "success" and not passed:
        disposition = "task_failure"
    rationale = ""
    if not passed:
        rationale = f"harness error: {error_tail.splitlines()[-1]}" if error_tail else grade.rationale
    return {
        "task_id": task_id,
        "score": 0.0 if error_tail else grade.score,
        "passed": passed,
        "disposition": disposition,
        "error_tail": error_tail,
        "rationale": rationale,
        "failure_file": None if passed else failure_file,
    }


# the patch bank ------------------------------------------------------------------------------------------------


def diff_files(diff: str) -> tuple[str, ...]:
    """Harness-relative paths a unified diff touches (new files included)."""
    files = []
    for match in re.finditer(r"^\+\+\+ (?:b/)?(\S+)|^--- (?:a/)?(\S+)", diff, re.M):
        path = match.group(1) or match.group(2)
        if path != "/dev/null" and path not in files:
            files.append(path)
    return tuple(files)


def bank_metadata_of(bank_dir: str) -> dict[str, Any]:
    """`bank_dir/bank.json`: the patches' metadata in bank order and the `best_combination`."""
    with open(os.path.join(bank_dir, "bank.json"), encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def load_bank_dir(bank_dir: str) -> list[BankPatch]:
    """Every patch of `bank_dir` (`<id>.patch` + its `bank.json` entry), in bank order."""
    from saddler.benchmark import BankPatch

    out = []
    for meta in bank_metadata_of(bank_dir)["patches"]:
        with open(os.path.join(bank_dir, f"{meta['id']}.patch"), encoding="utf-8") as fh:
            diff = fh.read()
        out.append(
            BankPatch(
                id=meta["id"],
                kind=meta["kind"],
                subtype=meta["subtype"],
                symptoms=tuple(meta["symptoms"]),
                description=meta["description"],
                diff=diff,
                files=diff_files(diff),
            )
        )
    return out


# the benchmark -------------------------------------------------------------------------------------------------


class SimBenchmark:
    """The `Benchmark` members a simulated benchmark package implements alike. A subclass names its `package`
    (which has `tasks.all_specs()`, `tasks.spec_by_id(id)`, `runner.rollout_dict(harness_dir, spec, seed,
    trace_dir, noise)`, `symptoms.extract(events)` and a `patch_bank/` folder), its `here` folder and the sources
    its two fingerprints hash."""

    name = ""
    trace_format = ""
    score_kind = "pass_rate"
    metric = None
    package = ""
    here = ""
    bench_sources: tuple[str, ...] = ()
    model_sources: tuple[str, ...] = ()

    def __init__(self, *, noise: float = 1.0) -> None:
        if noise < 0:
            raise ValueError("noise must be >= 0 (1.0 is the calibrated default)")
        self.noise = float(noise)

    def _module(self, name: str) -> Any:
        return importlib.import_module(f"{self.package}.{name}")

    def tasks(self, split: str) -> list[Task]:
        """The split's tasks in a fixed order (groups are held out: a group belongs to one split)."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
        return [s.task() for s in self._module("tasks").all_specs() if s.split == split]

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        spec = self._module("tasks").spec_by_id(task.id)
        from saddler.benchmark import RolloutResult

        fields = self._module("runner").rollout_dict(harness_dir, spec, seed, trace_dir, self.noise)
        return RolloutResult.from_dict(fields)

    def fingerprint(self) -> str:
        return source_digest(self.here, self.bench_sources) + f"-n{self.noise:g}"

    def model_fingerprint(self) -> str:
        return source_digest(self.here, self.model_sources)

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        """Failure signatures of a failed rollout, read from its trace ([] when passed or no trace)."""
        if result.passed or not result.trace_path or not os.path.isfile(result.trace_path):
            return []
        found: list[Symptom] = self._module("symptoms").extract(read_trace(result.trace_path))
        return found

    def patch_bank(self) -> list[BankPatch]:
        return load_bank_dir(os.path.join(self.here, "patch_bank"))

    audit_params: tuple[str, ...] = ()  # task parameters a harness must not contain ("sites.fixed": nested)

    def audit_strings(self, tasks: list[Task]) -> list[AuditString]:
        """Each task's `audit_params` (the expected answer and the values the grader checks), the grader's
        messages (its string literals with a space, 12 characters or more) and the benchmark's own files but the
        harness's SDK (`benchmarks.opsdesk.grader`, `benchmarks/opsdesk/grader.py`)."""
        from saddler.benchmark import AuditString

        specs = self._module("tasks")
        out = [AuditString(text, "grader string") for text in _grader_strings(os.path.join(self.here, "grader.py"))]
        folder = self.package.replace(".", "/")
        for name in [n for n in self.bench_sources if "/" not in n and n != "sdk.py"] + ["patch_bank"]:
            module = name.removesuffix(".py")
            out += [
                AuditString(f"{self.package}.{module}", "evaluation file"),
                AuditString(f"{folder}/{name}", "evaluation file"),
            ]
        for task in tasks:
            params = specs.spec_by_id(task.id).params
            for key in self.audit_params:
                out += [AuditString(text, "expected answer", task.id) for text in _leaves(params, key.split("."))]
        return out

    def trace_reads(self, result: RolloutResult) -> list[str]:
        """The benchmark files the harness code opened (the trace's `file_read` events, see `simwatch.WatchReads`)."""
        if not result.trace_path or not os.path.isfile(result.trace_path):
            return []
        return sorted({e["path"] for e in read_trace(result.trace_path) if e.get("type") == "file_read"})

    def bank_metadata(self) -> dict[str, Any]:
        """`patch_bank/bank.json`: each patch's metadata (effect, conflicts) and the `best_combination`."""
        return bank_metadata_of(os.path.join(self.here, "patch_bank"))

    def check(self) -> list[str]:
        """Nothing to install: pure Python and offline."""
        return []

    def rollout_needs(self) -> RolloutNeeds:
        """Nothing: a simulation, no network, no key."""
        from saddler.benchmark import RolloutNeeds

        return RolloutNeeds()


def _leaves(value: Any, keys: list[str]) -> list[str]:
    """The text leaves of `value` under the key path `keys` (lists are walked; numbers become text)."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item, keys)]
    if keys:
        return _leaves(value.get(keys[0]), keys[1:]) if isinstance(value, dict) else []
    if isinstance(value, bool) or value is None or isinstance(value, dict):
        return []
    return [str(value).strip()]


def _grader_strings(path: str) -> list[str]:
    """The grader's messages: string literals (not docstrings) holding a space, 12 characters or more stripped."""
    import ast

    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))]
    docs = {(ast.get_docstring(n, clean=False) or "").strip() for n in nodes}
    found = [n.value.strip() for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return sorted({t for t in found if len(t) >= 12 and " " in t and t not in docs})


# the standalone runner -----------------------------------------------------------------------------------------


def runner_main(
    argv: list[str],
    prog: str,
    spec_by_id: Callable[[str], Any],
    rollout: Callable[[str, Any, int, str, float], dict[str, Any]],
) -> int:
    """`python -m PROG HARNESS_DIR TASK_ID SEED [--trace-dir D] [--noise X]`: print the rollout's result as JSON."""
    args = list(argv)
    opts = {"--trace-dir": "traces", "--noise": "1.0"}
    for key in list(opts):
        if key in args:
            i = args.index(key)
            opts[key] = args[i + 1]
            del args[i : i + 2]
    if len(args) != 3:
        print(f"usage: python -m {prog} HARNESS_DIR TASK_ID SEED [--trace-dir D] [--noise X]", file=sys.stderr)
        return 2
    try:
        spec = spec_by_id(args[1])
    except KeyError:
        print(f"unknown task id {args[1]!r}", file=sys.stderr)
        return 2
    stdout, sys.stdout = sys.stdout, sys.stderr  # whatever harness code prints must not corrupt the JSON
    try:
        result = rollout(args[0], spec, int(args[2]), opts["--trace-dir"], float(opts["--noise"]))
    finally:
        sys.stdout = stdout
    print(json.dumps(result, sort_keys=True))
    return 0

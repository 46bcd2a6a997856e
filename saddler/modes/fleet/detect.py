"""Finding an eval command when fleet.json has none, as the 002 seed says: Makefile bench/benchmark/perf
targets, package.json scripts (`bench*`, then `test`: `npm run bench`, `yarn test`; the runner follows the
lock file), pytest `benchmark` markers, a bench/ folder; else write `bench.py` (prints one number: the wall
time in ms of a target command, seeded through SADDLER_BENCH_SEED). A found benchmark that does not print a
single number gets a `metric_regex` for its `name: value` line (`metric_regex_for`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

MAKE_TARGETS = ("bench", "benchmark", "perf")
_MAKE_TARGET = re.compile(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", re.MULTILINE)
_PYTEST_MARK = re.compile(r"@pytest\.mark\.benchmark\b|^\s*benchmark\s*:", re.MULTILINE)
BENCH_SCRIPT = '''#!/usr/bin/env python3
"""bench.py (written by saddler): time one run of the target command, print the wall time in ms.

Exit 0 on success, non-zero when the target fails. SADDLER_BENCH_SEED (fresh for every timed run) is
passed on to the target, which should draw its inputs from it so no fixed input can be memoised.
"""
import os
import subprocess
import sys
import time

TARGET = {target!r}

seed = os.environ.get("SADDLER_BENCH_SEED", "0")
start = time.perf_counter()
proc = subprocess.run(TARGET, shell=True, env={{**os.environ, "SADDLER_BENCH_SEED": seed}},
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
elapsed_ms = (time.perf_counter() - start) * 1000
if proc.returncode != 0:
    sys.stderr.write(proc.stderr[-2000:])
    sys.exit(proc.returncode or 1)
print(f"{{elapsed_ms:.3f}}")
'''


@dataclass(frozen=True)
class Detection:
    command: str
    source: str  # what it was found from


def detect_eval_command(workdir: Path) -> Detection | None:
    """The first existing benchmark of the workdir, in the seed's order, or None."""
    workdir = Path(workdir)
    makefile = next((workdir / n for n in ("Makefile", "makefile", "GNUmakefile") if (workdir / n).is_file()), None)
    if makefile is not None:
        targets = set(_MAKE_TARGET.findall(makefile.read_text(encoding="utf-8", errors="replace")))
        for name in MAKE_TARGETS:
            if name in targets:
                return Detection(f"make {name}", f"{makefile.name} target {name}")
    package = workdir / "package.json"
    if package.is_file():
        try:
            scripts = json.loads(package.read_text(encoding="utf-8")).get("scripts") or {}
        except (json.JSONDecodeError, AttributeError):
            scripts = {}
        runner = _js_runner(workdir)
        bench = sorted(k for k in scripts if k.startswith("bench"))
        if bench:
            run = f"{runner} {bench[0]}" if runner == "yarn" else f"{runner} run {bench[0]}"
            return Detection(run, f"package.json script {bench[0]}")
        if "test" in scripts:
            return Detection(f"{runner} test", "package.json script test")
    for cfg in ("pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"):
        path = workdir / cfg
        if (
            path.is_file()
            and "markers" in (text := path.read_text(encoding="utf-8", errors="replace"))
            and _PYTEST_MARK.search(text)
        ):
            return Detection("python3 -m pytest -m benchmark -q", f"pytest benchmark marker in {cfg}")
    for test in sorted(workdir.glob("test*/**/*.py")) + sorted(workdir.glob("test_*.py")):
        if _PYTEST_MARK.search(test.read_text(encoding="utf-8", errors="replace")):
            return Detection("python3 -m pytest -m benchmark -q", f"pytest benchmark marker in {test.name}")
    bench_dir = workdir / "bench"
    if bench_dir.is_dir():
        for pattern, runner in (("*.py", "python3"), ("*.sh", "bash")):
            scripts_found = sorted(bench_dir.glob(pattern))
            if scripts_found:
                return Detection(f"{runner} bench/{scripts_found[0].name}", "bench/ folder")
    return None


def _js_runner(workdir: Path) -> str:
    """yarn or pnpm when their lock file is there, else npm."""
    if (workdir / "yarn.lock").is_file():
        return "yarn"
    if (workdir / "pnpm-lock.yaml").is_file():
        return "pnpm"
    return "npm"


NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NAME_VALUE = re.compile(rf"^\s*([A-Za-z_][\w.@/-]*)\s*([:=])\s*({NUMBER})\s*$", re.MULTILINE)
GOAL_WORDS = {
    "minimize": {"latency", "time", "duration", "ms", "sec", "seconds", "loss", "error", "errors", "p50", "p90",
                 "p95", "p99", "size", "bytes", "mem", "memory", "cost"},
    "maximize": {"acc", "accuracy", "score", "rate", "pass", "throughput", "qps", "rps", "f1", "bleu", "reward"},
}  # fmt: skip


@dataclass(frozen=True)
class MetricGuess:
    regex: str  # "" when the output is a single number
    line: str  # the output line the metric was read from
    candidates: int  # how many `name: value` lines there were


def metric_regex_for(output: str, direction: str = "minimize") -> MetricGuess | None:
    """How to read the metric of a benchmark's output: none needed for a single number, else a regex for its
    `name: value` line (a name that sounds like what `direction` optimizes first, then any metric-like name,
    the last such line otherwise); None when the output has neither."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    if lines and re.fullmatch(NUMBER, lines[-1]):
        return MetricGuess("", lines[-1], 0)
    pairs = _NAME_VALUE.findall(output)
    if not pairs:
        return None
    words = lambda name: set(re.split(r"[^a-z0-9]+", name.lower()))  # noqa: E731
    goal = GOAL_WORDS.get(direction, set())
    other = set().union(*GOAL_WORDS.values())
    name, sep, _value = ([p for p in pairs if words(p[0]) & goal] or [p for p in pairs if words(p[0]) & other]
                         or pairs)[-1]  # fmt: skip
    shown = f"{name}: ..." if sep == ":" else f"{name}=..."
    return MetricGuess(rf"^{re.escape(name)}\s*{sep}\s*({NUMBER})", shown, len(pairs))


def write_bench_script(workdir: Path, target: str) -> Detection:
    """Write workdir/bench.py (saddler_bench.py when bench.py exists: never overwrite) timing `target`, and
    return the eval command that runs it."""
    name = "bench.py" if not (Path(workdir) / "bench.py").exists() else "saddler_bench.py"
    path = Path(workdir) / name
    path.write_text(BENCH_SCRIPT.format(target=target), encoding="utf-8")
    path.chmod(0o755)
    return Detection(f"python3 {name}", f"{name} written by saddler (times: {target})")

"""Finding an eval command when fleet.json has none, as the 002 seed says: Makefile bench/benchmark/perf
targets, package.json `bench*` scripts, pytest `benchmark` markers, a bench/ folder; else write `bench.py`
(prints one number: the wall time in ms of a target command, seeded through SADDLER_BENCH_SEED)."""

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
        bench = sorted(k for k in scripts if k.startswith("bench"))
        if bench:
            return Detection(f"npm run {bench[0]}", f"package.json script {bench[0]}")
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


def write_bench_script(workdir: Path, target: str) -> Detection:
    """Write workdir/bench.py (saddler_bench.py when bench.py exists: never overwrite) timing `target`, and
    return the eval command that runs it."""
    name = "bench.py" if not (Path(workdir) / "bench.py").exists() else "saddler_bench.py"
    path = Path(workdir) / name
    path.write_text(BENCH_SCRIPT.format(target=target), encoding="utf-8")
    path.chmod(0o755)
    return Detection(f"python3 {name}", f"{name} written by saddler (times: {target})")

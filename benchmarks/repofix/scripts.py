"""Running the agent's reproduction scripts: what `python repro.py` would print for the checkout as it is.

A script is read, not executed. It may import repository modules (`from pkg.mod import f` or `import pkg.mod`:
an import that does not resolve fails as it would) and assert on calls of the functions the issue is about
(`assert f(...) == ...`, one case per line; `None` among the arguments is the None case, `[]`/`''` the empty
one). `for _ in range(N):` repeats the asserts below it, which matters for an intermittent bug.
"""

from __future__ import annotations

import re

from benchmarks.repofix.analysis import imports
from benchmarks.repofix.env import FLAKY_BUG_FAILS

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    import random
    from typing import Any

    from benchmarks.repofix.behaviour import Behaviour

ASSERT = re.compile(r"^\s*assert (\w+)\((.*)\) == ")


def _case(args: str) -> str:
    if "None" in args:
        return "none"
    return "empty" if re.search(r"\[\]|''|\"\"", args) else "issue"


def run_repro(text: str, behaviour: Behaviour, spec: Any, rng: random.Random) -> tuple[str, int]:
    """(output, exit code) of running the script `text` against the checkout `behaviour` describes."""
    sites = spec.params["sites"]
    lines = text.split("\n")
    modules = [(m, line) for m, _names, line in imports(text)]
    modules += [(m.group(1), n) for n, line in enumerate(lines, 1) if (m := re.match(r"^import ([\w.]+)$", line))]
    for module, at in modules:
        path = behaviour.by_module.get(module)
        error = behaviour.load_error(path) if path else f"ModuleNotFoundError: No module named '{module}'"
        if error:
            return _traceback(at, lines[at - 1], error), 1
    repeat = int(m.group(1)) if (m := re.search(r"range\((\d+)\)", text)) else 1
    for number, line in enumerate(lines, 1):
        match = ASSERT.match(line)
        if not match:
            continue
        func, args = match.group(1), match.group(2)
        for index, site in enumerate(sites):
            called = func == site["func"] or (site["kind"] == "multi_file" and site["func"] + "(" in args)
            if not called:
                continue
            case = _case(args)
            ok = behaviour.case_passes(index, case if site["kind"] == "edge_case" else "issue")
            if site["kind"] == "flaky_test" and behaviour.site_state(index) != "fixed":
                ok = all(rng.random() >= FLAKY_BUG_FAILS for _ in range(repeat))
            if not ok:
                message = "TypeError" if case == "none" else "AssertionError"
                return _traceback(number, line.strip(), f"{message}: the issue still reproduces"), 1
    return "the issue does not reproduce\n", 0


def _traceback(line: int, text: str, error: str) -> str:
    where = f'  File "repro_issue.py", line {line}, in <module>'
    return f"Traceback (most recent call last):\n{where}\n    {text.strip()}\n{error}\n"

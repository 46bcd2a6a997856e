"""What `pytest -v` prints for a simulated test run: per-test lines, errors, failures, the summary at the end.

The part a model needs to act on a failure (which test, which assertion) sits at the end of a long log, as in a
real pytest run; a command killed by the sandbox's timeout prints only the first tests and no summary.
"""

from __future__ import annotations

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

RULE = 78


def _banner(title: str, fill: str = "=") -> str:
    side = max(1, (RULE - len(title) - 2) // 2)
    return f"{fill * side} {title} {fill * side}"


def render_log(results: dict[str, tuple[str, str]], run: Any, timeout_s: float) -> str:
    """The log of one run: `results` maps a test id (or a test file that failed to collect) to its outcome."""
    collected = f"collected {run.collected} items" + (f" / {len(run.errors)} errors" if run.errors else "")
    lines = [_banner("test session starts"), "platform linux -- Python 3.12.1, pytest-8.3.2", "rootdir: /repo",
             collected, ""]  # fmt: skip
    tests = [(t, o) for t, (o, _) in results.items() if o != "error"]
    shown = tests
    if run.timed_out:
        shown = tests[: int(len(tests) * timeout_s / run.duration_s)]
    for k, (test_id, outcome) in enumerate(shown, 1):
        status = "PASSED" if outcome == "passed" else "FAILED"
        head = f"{test_id} {status}"
        lines.append(f"{head:<{RULE - 7}} [{100 * k // max(1, len(tests)):3d}%]")
    if run.timed_out:
        lines += ["", f"Timeout: the command ran longer than {timeout_s:.0f}s and was killed."]
        return "\n".join(lines) + "\n"
    if run.errors:
        lines += ["", _banner("ERRORS")]
        for path, message in run.errors.items():
            lines += [_banner(f"ERROR collecting {path}", "_"), message, ""]
    if run.failed:
        lines += ["", _banner("FAILURES")]
        for test_id, message in run.failed.items():
            name = test_id.split("::")[1]
            lines += [_banner(name, "_"), "", f"    def {name}():", ">       assert ...", f"E       {message}", "",
                      f"{test_id.split('::')[0]}:4: {message.split(':')[0]}", ""]  # fmt: skip
    if run.failed or run.errors:
        lines.append(_banner("short test summary info"))
        lines += [f"FAILED {t} - {m}" for t, m in run.failed.items()]
        lines += [f"ERROR {p} - {m.split(':')[0]}" for p, m in run.errors.items()]
    counts = [f"{len(run.failed)} failed"] if run.failed else []
    counts.append(f"{run.passed} passed")
    if run.errors:
        counts.append(f"{len(run.errors)} error{'s' if len(run.errors) > 1 else ''}")
    lines.append(_banner(f"{', '.join(counts)} in {run.duration_s:.2f}s"))
    return "\n".join(lines) + "\n"

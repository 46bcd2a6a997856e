"""Test tool: run the repository's tests."""

from benchmarks.repofix.sdk import tool


@tool("run_tests", "Run the test suite of the repository and show the pytest output.")
def run_tests(ws):
    run = ws.run_tests(**_where(ws))
    return _report(ws, run)


def _where(ws):
    """Where pytest runs: the repository root, on every test."""
    return {}


def _report(ws, run):
    """What the model is shown: pytest's output as it is."""
    return run.log

"""The progress plot drawn by a helper process started when the run starts, so matplotlib's import is not paid at
the end of the run.

Importing matplotlib costs about half a second of CPU, the drawing a quarter. `saddler run` starts a
`PlotProcess` first thing: a child interpreter imports matplotlib and the plot module while the optimizer imports
and opens the run (single-threaded: the machine's other core is idle then), then waits on its stdin. It is the
work the run would otherwise do at its end, at the same priority, only earlier. When the search ends,
`start(db, png, run_id)` hands it the request (one JSON line) and `wait()` collects the answer: the child opens
the store read-only and writes the PNG with `saddler.reporting.plot.plot_progress`, the same code as in-process,
so the file is the same, while the run evaluates test (the plot shows no test rollout) and exports the best harness.

Whatever goes wrong in the child (it died, it failed, it timed out) `wait()` says False and the caller draws in
its own process instead, as before: the plot is never lost and a real fault (a full disk) surfaces as it always
did. A child whose stdin closes without a request exits without doing anything; `close()` stops it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from saddler.procs import wait_exit

PLOT_NAME = "progress.png"
WAIT_S = 120.0  # a plot takes well under a second; beyond this the caller draws it itself


class PlotProcess:
    """One helper process that draws one plot on request (see the module docstring)."""

    def __init__(self) -> None:
        self.failure = ""  # why the requested plot was not drawn (its stderr tail), for the caller to say
        self._asked = False
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close(); a file: the child never blocks
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "saddler.reporting.plot_process"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
            )
        except OSError as exc:
            self._proc = None  # no helper (no process left, ...): the plot is drawn in-process
            self.failure = f"cannot start it: {exc}"

    def start(self, db: Path, png: Path, run_id: int) -> bool:
        """Ask the child to draw the plot of run `run_id` of the store `db` into `png`; False when it cannot."""
        proc = self._proc
        if proc is None or proc.stdin is None or self._asked or proc.poll() is not None:
            return False
        request = {"db": str(db), "png": str(png), "run_id": run_id}
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
            proc.stdin.close()
        except OSError:
            return False
        self._asked = True
        return True

    def wait(self, timeout: float = WAIT_S) -> bool:
        """True when the child drew the plot it was asked for (`start`); else False with `failure` set."""
        proc = self._proc
        if proc is None or not self._asked:
            return False
        code = proc.wait() if wait_exit(proc, timeout) else None
        if code is None:
            self.close()
            self.failure = f"no answer within {timeout:g} s"
            return False
        if code != 0:
            self._stderr.seek(0)
            tail = self._stderr.read().decode("utf-8", "replace").strip().splitlines()[-1:]
            self.failure = f"exit {code}" + (f": {tail[0][:300]}" if tail else "")
        return code == 0

    def close(self) -> None:
        """Stop the child if it still runs (a run that ends without a plot: paused, stopped, failed)."""
        proc = self._proc
        if proc is not None:
            if proc.stdin is not None and not proc.stdin.closed:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self._stderr.close()


def main() -> int:
    """Child side: import what drawing needs, then draw the one requested plot (none when stdin closes empty)."""
    from evodag.store import EvoDAG
    from saddler.reporting.plot import plot_progress, preload

    preload()
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    request = json.loads(line)
    with EvoDAG(Path(request["db"]), readonly=True) as store:
        plot_progress(store, Path(request["png"]), request["run_id"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""For tests that interrupt a child `saddler` as Ctrl-C does: the child must start with SIGINT at its default.

A process started in the background by a non-interactive shell (`cmd &`, `nohup`, many CI launchers) inherits
SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the child would run on through the test's
SIGINT and exit 0. Pass `preexec_fn=sigint_default` to the child's `subprocess` call."""

from __future__ import annotations

import signal


def sigint_default() -> None:
    """Run in the child before exec: SIGINT back to its default, so Python installs its Ctrl-C handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

"""What a saddler command said on stderr besides the run's start warnings, for tests that expect one line.

A run starts with `warning: ...` lines that depend on the machine, not on the test (without bubblewrap: the sandbox
fallback's; scripts/test.sh installs bubblewrap where it can and tests the fallbacks where it cannot)."""

from __future__ import annotations


def said(stderr: str) -> list[str]:
    """The lines of `stderr` that are not start warnings."""
    return [line for line in stderr.splitlines() if not line.startswith("warning: ")]

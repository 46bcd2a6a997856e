"""docs/cli.md is what scripts/cli_reference.py renders from the CLIs' own help today: a command or option added,
renamed or reworded without regenerating the page fails here."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

from repo_paths import REPO

if TYPE_CHECKING:
    from plugins.clitree import CommandTree
    from plugins.docs import Doc


def test_the_committed_cli_reference_is_the_generated_one() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/cli_reference.py", "--check"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr + "\nregenerate it: python scripts/cli_reference.py"


def test_the_reference_has_every_command_of_both_clis(docs: dict[str, Doc], cli_trees: dict[str, CommandTree]) -> None:
    headings = {line.lstrip("#").strip() for line in docs["docs/cli.md"].text.splitlines() if line.startswith("#")}
    everything = {leaf for tree in cli_trees.values() for leaf in tree.leaves()}
    assert sorted(everything - headings) == []

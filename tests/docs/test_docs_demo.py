"""README's account of the main job matches what it does today: the commands `scripts/demo.sh` runs, and the
grep-able summary lines a real demo run prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from plugins.docs import Doc


def readme_summary(readme: Doc) -> list[str]:
    """The sample output block: the one that starts with `termination:`."""
    blocks = [b for b in readme.blocks if b.text.startswith("termination:")]
    assert len(blocks) == 1
    return blocks[0].text.splitlines()


def readme_demo_commands(readme: Doc) -> list[str]:
    """The commands README says `scripts/demo.sh` runs (`… runs `A` and then `B`.`)."""
    match = re.search(r"`scripts/demo\.sh` runs `([^`]+)` and then `([^`]+)`", readme.prose)
    assert match is not None
    return [match.group(1), match.group(2)]


def test_demo_sh_runs_the_commands_readme_names(readme: Doc, repo_root: Path) -> None:
    script = (repo_root / "scripts" / "demo.sh").read_text(encoding="utf-8")
    ran = [
        line.replace('"$VENV/bin/saddler"', "saddler").replace('"$RUN_DIR"', "demo-run")
        for line in script.splitlines()
        if line.startswith('"$VENV/bin/saddler"')
    ]
    assert re.search(r"^RUN_DIR=\$\{1:-demo-run\}$", script, re.M)
    assert ran == readme_demo_commands(readme)


@pytest.mark.slow
def test_the_readme_sample_output_is_what_the_demo_prints(readme: Doc, tmp_path: Path) -> None:
    outputs = []
    for command in readme_demo_commands(readme):
        proc = subprocess.run(
            [sys.executable, "-m", "saddler", *command.split()[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs.append(proc.stdout)
    assert outputs[0] == "created demo-run/saddler.toml\n"
    printed = outputs[1].replace(str(tmp_path), "/…").splitlines()
    assert printed == readme_summary(readme)

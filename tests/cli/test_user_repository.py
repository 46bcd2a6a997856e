"""The user's repository stays untouched, and `init` says what it does with a harness folder (issue 20, items 4
and 8): `run.harness` must be the run's own clone inside the run folder; a plain folder is committed as the
baseline of the run's clone, and init says so; `validate` finds what `init` would refuse."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gitrepo import git
from typer.testing import CliRunner

from saddler.cli.app import app

runner = CliRunner()


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def _refs(repo: Path) -> list[str]:
    return subprocess.run(["git", "for-each-ref"], cwd=repo, capture_output=True, text=True, check=True).stdout.split(
        "\n"
    )


def _set_harness(run_dir: Path, value: str) -> None:
    config = run_dir / "saddler.toml"
    lines = [
        f'harness = "{value}"' if line.startswith("harness = ") else line for line in config.read_text().split("\n")
    ]
    config.write_text("\n".join(lines))


@pytest.fixture
def opsdesk_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "r"
    code, output = _cli("init", str(run_dir), "--template", "opsdesk", "--set", "loop.max_iterations=1")
    assert code == 0, output
    return run_dir


@pytest.mark.parametrize("where", ["absolute", "relative", "symlink"])
def test_a_harness_outside_the_run_folder_is_refused_naming_run_harness(
    opsdesk_run: Path, tmp_path: Path, where: str
) -> None:
    mine = tmp_path / "my-agent"
    subprocess.run(["git", "clone", "-q", str(opsdesk_run / "harness"), str(mine)], check=True)
    refs = _refs(mine)
    if where == "absolute":
        _set_harness(opsdesk_run, str(mine))
    elif where == "relative":
        _set_harness(opsdesk_run, "../my-agent")
    else:
        _set_harness(opsdesk_run, "mine")
        (opsdesk_run / "mine").symlink_to(mine)
    for command in ("validate", "run"):
        code, output = _cli(command, str(opsdesk_run))
        assert code == 2, output
        assert "run.harness" in output and "outside the run folder" in output, output
    assert _refs(mine) == refs, "saddler wrote into the user's repository"


def test_a_harness_folder_without_saddler_toml_names_run_harness(opsdesk_run: Path) -> None:
    (opsdesk_run / "elsewhere").mkdir()
    _set_harness(opsdesk_run, "elsewhere")
    for command in ("validate", "run"):
        code, output = _cli(command, str(opsdesk_run))
        assert code == 2 and "run.harness" in output, output
    _set_harness(opsdesk_run, "/etc")
    code, output = _cli("validate", str(opsdesk_run))
    assert code == 2 and "run.harness" in output, output


def _harness(root: Path, files: dict[str, str], *, commit: bool = True) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if commit:
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "baseline")
    return root


TOML = '[harness]\nname = "h"\n[harness.components]\ncapability = ["tools/**"]\nsteering = ["*.md"]\n'


def test_a_plain_folder_is_committed_as_the_baseline_and_init_says_so(tmp_path: Path) -> None:
    plain = _harness(
        tmp_path / "plain", {"saddler.toml": TOML, "tools/a.py": "x = 1\n", "system.md": "hi\n"}, commit=False
    )
    code, output = _cli("init", str(tmp_path / "r"), "--harness", str(plain), "--benchmark", "opsdesk")
    assert code == 0, output
    said = [line for line in output.splitlines() if "not a git repository" in line]
    assert len(said) == 1 and "baseline" in said[0], output
    assert not (plain / ".git").exists(), "the user's folder is not changed"


def test_validate_refuses_what_init_refuses(tmp_path: Path) -> None:
    only_tools = _harness(tmp_path / "caponly", {"saddler.toml": TOML.replace('steering = ["*.md"]\n', ""),
                                                 "tools/a.py": "x = 1\n"})  # fmt: skip
    dirty = _harness(tmp_path / "dirty", {"saddler.toml": TOML, "tools/a.py": "x = 1\n", "system.md": "hi\n"})
    (dirty / "tools" / "a.py").write_text("x = 2\n")
    for harness in (only_tools, dirty):
        init_code, init_out = _cli("init", str(tmp_path / f"run-{harness.name}"), "--harness", str(harness),
                                   "--benchmark", "opsdesk")  # fmt: skip
        assert init_code == 2, init_out
        code, _output = _cli("validate", str(harness))
        assert code == 2, f"validate says ok on a harness init refuses:\n{init_out}"


def test_include_uncommitted_counts_the_files_it_includes(tmp_path: Path) -> None:
    repo = _harness(tmp_path / "h", {"saddler.toml": TOML, "system.md": "hi\n"})
    (repo / "tools").mkdir()
    (repo / "tools" / "a.py").write_text("x = 1\n")  # the only capability file is not committed yet
    code, output = _cli("init", str(tmp_path / "r"), "--harness", str(repo), "--benchmark", "opsdesk",
                        "--include-uncommitted")  # fmt: skip
    assert code == 0, output
    assert "tools/a.py" in output


def test_the_phase_hint_is_not_given_when_phases_are_already_none(tmp_path: Path) -> None:
    toml = '[harness]\nname = "h"\n[harness.components]\nprotected = ["**"]\n'
    repo = _harness(tmp_path / "h", {"saddler.toml": toml, "agent.py": "x = 1\n"})
    code, output = _cli("init", str(tmp_path / "r"), "--harness", str(repo), "--benchmark", "opsdesk",
                        "--set", "policies.phases=none")  # fmt: skip
    assert code == 2 and "no editable file" in output, output
    assert 'phases = "none"' not in output, output

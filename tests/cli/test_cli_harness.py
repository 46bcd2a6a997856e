"""`saddler list`, the shared CLI helpers, and the bundled-resource lookups."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import typer
from repo_paths import REPO
from typer.testing import CliRunner

from saddler import resources
from saddler.benchmark import BENCHMARKS
from saddler.cli.app import app
from saddler.cli.common import handle_errors, print_json
from saddler.errors import ConfigError, HarnessError, UnknownNameError

runner = CliRunner()
TEMPLATES_ROOT = REPO / "harness_templates"


def bundled_template_names() -> list[str]:
    return sorted(
        p.name for p in TEMPLATES_ROOT.iterdir() if (p / "saddler.toml").is_file() or (p / "SKILL.md").is_file()
    )


def test_list_json_document() -> None:
    result = runner.invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert sorted(doc) == ["benchmarks", "templates"]
    assert [b["name"] for b in doc["benchmarks"]] == sorted(BENCHMARKS)
    assert all(sorted(b) == ["description", "name"] for b in doc["benchmarks"])
    assert [t["name"] for t in doc["templates"]] == bundled_template_names()
    for t in doc["templates"]:
        assert sorted(t) == ["description", "name", "path"]
        assert Path(t["path"]) == TEMPLATES_ROOT / t["name"]


def test_list_text() -> None:
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "benchmarks:"
    assert [line.split()[0] for line in lines[1 : 1 + len(BENCHMARKS)]] == sorted(BENCHMARKS)
    assert lines[1 + len(BENCHMARKS)] == "templates:"


def test_benchmark_descriptions_come_from_class_or_module_docstrings_without_import() -> None:
    descriptions = resources.benchmarks()
    assert sorted(descriptions) == sorted(BENCHMARKS)
    for name, target in BENCHMARKS.items():
        module, _, attr = target.partition(":")
        parts = module.split(".")
        candidates = [Path(*parts).with_suffix(".py"), Path(*parts) / "__init__.py"]
        root = REPO
        source = next((root / c for c in candidates if (root / c).is_file()), None)
        if source is None:
            assert descriptions[name] == "(not installed)"
        else:
            tree = ast.parse(source.read_text())
            classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == attr]
            doc = (ast.get_docstring(classes[0]) if classes else None) or ast.get_docstring(tree) or ""
            assert descriptions[name] == (doc.strip().splitlines()[0] if doc.strip() else "")


def test_template_lookup_and_description(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError) as exc:
        resources.template_path("no-such-template")
    assert exc.value.exit_code == 2
    assert str(exc.value).startswith("unknown template 'no-such-template'; available: ")
    for name in bundled_template_names():
        assert resources.template_path(name) == TEMPLATES_ROOT / name
    (tmp_path / "saddler.toml").write_text('[harness]\ndescription = """\nFirst line.\nSecond."""\n')
    assert resources.template_description(tmp_path) == "First line."
    (tmp_path / "saddler.toml").write_text("not toml [")
    (tmp_path / "SKILL.md").write_text("---\nname: s\ndescription: from the skill\n---\n")
    assert resources.template_description(tmp_path) == "from the skill"


def _mini_app() -> typer.Typer:
    mini = typer.Typer()

    @mini.command("boom")
    @handle_errors
    def boom(kind: str = typer.Argument(...)) -> None:
        if kind == "config":
            raise ConfigError("run.loop.batch_size: must be >= 1")
        if kind == "harness":
            raise HarnessError("not a git repo; run `git init`")
        print_json({"b": [1, 2], "a": Path("x/y")})

    @mini.command("other")
    def other() -> None:
        pass

    return mini


def test_handle_errors_maps_saddler_errors_to_exit_codes() -> None:
    mini = _mini_app()
    result = runner.invoke(mini, ["boom", "config"])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", "error: run.loop.batch_size: must be >= 1\n")
    result = runner.invoke(mini, ["boom", "harness"])
    assert (result.exit_code, result.stderr) == (1, "error: not a git repo; run `git init`\n")
    result = runner.invoke(mini, ["boom", "ok"])
    assert result.exit_code == 0
    assert result.stdout == '{\n  "a": "x/y",\n  "b": [\n    1,\n    2\n  ]\n}\n'

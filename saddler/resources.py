"""Locating what ships with saddler: harness templates and the registered benchmarks.

Works from a source checkout and after a plain (non-editable) `pip install`: templates are found with
`importlib.resources`, benchmarks (bundled and entry points) are described from their module docstring
without importing them.
"""

from __future__ import annotations

import ast
import importlib.util
from importlib import resources
from pathlib import Path

from saddler.benchmark import registered_benchmarks
from saddler.errors import UnknownNameError

TEMPLATE_MARKERS = ("saddler.toml", "SKILL.md")


def templates() -> dict[str, Path]:
    """Bundled harness templates by name: folders of `harness_templates` holding a saddler.toml or SKILL.md."""
    root = Path(str(resources.files("harness_templates")))
    found = {}
    for child in sorted(root.iterdir()):
        if child.is_dir() and any((child / marker).is_file() for marker in TEMPLATE_MARKERS):
            found[child.name] = child
    return found


def template_path(name: str) -> Path:
    """The folder of the bundled template `name`; `UnknownNameError` lists the available ones."""
    found = templates()
    if name not in found:
        raise UnknownNameError("template", name, list(found))
    return found[name]


def template_description(path: Path) -> str:
    """First line of `[harness].description` in the template's saddler.toml, or of its SKILL.md
    frontmatter `description`; empty when neither says anything (never raises for a bad file)."""
    import tomllib

    from saddler.harness.structure import parse_frontmatter

    toml = path / "saddler.toml"
    if toml.is_file():
        try:
            harness = tomllib.loads(toml.read_text(encoding="utf-8")).get("harness", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            harness = {}
        text = harness.get("description", "") if isinstance(harness, dict) else ""
        if isinstance(text, str) and text.strip():
            return text.strip().splitlines()[0]
    skill = path / "SKILL.md"
    if skill.is_file():
        fields, _ = parse_frontmatter(skill.read_text(encoding="utf-8", errors="replace"))
        return (fields or {}).get("description", "")
    return ""


def benchmarks() -> dict[str, str]:
    """Registered benchmarks (bundled and `saddler.benchmarks` entry points) by name -> one-line description
    (the first line of the class's own docstring, else of its module's), found without importing them."""
    found = registered_benchmarks()
    return {name: _summary(*target.partition(":")[::2]) for name, target in sorted(found.items())}


def _summary(module: str, attr: str) -> str:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return "(not installed)"
    try:
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return ""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == attr]
    doc = (ast.get_docstring(classes[0]) if classes else None) or ast.get_docstring(tree) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""

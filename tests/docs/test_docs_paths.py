"""What the docs point at exists: every backticked repository path in README.md, DEVELOPERS.md and the pages of
the documentation site (docs/*.md), every module path they name relative to its package (`executor/sandbox.py`),
and every Python name they give (`saddler.procs.run_process_group`, `RunContext.update_best`)."""

from __future__ import annotations

import ast
import builtins
import fnmatch
import importlib
import re
import subprocess
from functools import cache
from typing import TYPE_CHECKING

import pytest
from plugins.docs import MAIN_DOCS
from repo_paths import REPO

if TYPE_CHECKING:
    from collections.abc import Callable

    from plugins.docs import Doc

SOURCE_PACKAGES = ("saddler", "evodag", "benchmarks")
CODE_FOLDERS = (*SOURCE_PACKAGES, "bench", "scripts")
"""Where a module path given relative to its package (`run/faults.py`, `plumbing.py`) is looked for."""
EXTERNAL_NAMES = {
    "GenerateConfig.seed": "Inspect AI's GenerateConfig (the inspect benchmark passes the rollout's seed)",
    "Database": "sqlite-utils' Database (what `StoreBase.db` hands out)",
    "BaseAgent": "Harbor's agent base class (the harbor benchmark's agent_import_path names one)",
    "AgentTimeoutError": "Harbor's exception type of an agent timeout (read from a trial's result.json)",
}
"""Python names the docs give that belong to other projects."""
_PLACEHOLDER = re.compile(r"<[^>/]*>")


@cache
def repo_files() -> tuple[str, ...]:
    """Tracked files, and new ones not ignored (a path a commit adds counts before it is committed)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return tuple(sorted(f for f in out.split("\0") if f and (REPO / f).exists()))


@cache
def top_level() -> frozenset[str]:
    return frozenset(f.split("/", 1)[0] for f in repo_files())


def _expand(pattern: str) -> list[str]:
    """`a/{b,c}.py` -> [`a/b.py`, `a/c.py`]; `<node>` placeholders become `*`."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [_PLACEHOLDER.sub("*", pattern)]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for option in match.group(1).split(",") for p in _expand(head + option + tail)]


def exists(pattern: str, anchored: bool) -> bool:
    """A file (or, with a trailing `/`, a folder) of the repository matches `pattern`: from the root when
    `anchored`, else as the tail of a source path (`executor/sandbox.py` is saddler/executor/sandbox.py)."""
    files = repo_files() if anchored else tuple(f for f in repo_files() if f.split("/", 1)[0] in CODE_FOLDERS)
    for option in _expand(pattern):
        folder = option.endswith("/")
        glob = option.rstrip("/") + ("/*" if folder else "")
        globs = [glob] if anchored else [f"*/{glob}"]
        if not any(fnmatch.fnmatchcase(f, g) for f in files for g in globs):
            return False
    return True


def path_words(doc: Doc) -> list[tuple[str, bool]]:
    """(word, anchored) for every word of a code span that names a repository path: anchored when it starts
    with a top-level folder or is a top-level file; relative when it is a module (`*.py`)."""
    out: list[tuple[str, bool]] = []
    for span in doc.spans():
        for word in span.split():
            word = word.split("::", 1)[0].rstrip(",;:)").lstrip("(")
            first = word.split("/", 1)[0]
            if ("/" in word and first in top_level()) or (word in top_level() and (REPO / word).is_file()):
                out.append((word, True))
            elif re.fullmatch(r"[\w/{},*<>.-]+\.py", word) and not re.fullmatch(r"\w+\.py@\w+", word):
                out.append((word, False))
    return out


@pytest.mark.parametrize("name", MAIN_DOCS)
def test_every_repository_path_in_the_docs_exists(docs: dict[str, Doc], name: str) -> None:
    words = path_words(docs[name])
    assert words or name.startswith("docs/"), "the docs name no path: is the parser broken?"
    missing = sorted({w for w, anchored in words if anchored and not exists(w, anchored=True)})
    assert missing == []


@pytest.mark.parametrize("name", [n for n in MAIN_DOCS if n != "README.md"])
def test_every_module_the_docs_name_by_its_package_path_exists(docs: dict[str, Doc], name: str) -> None:
    missing = sorted({w for w, anchored in path_words(docs[name]) if not anchored and not exists(w, anchored=False)})
    assert missing == []


def test_the_docs_point_nowhere_outside_the_repository(docs: dict[str, Doc]) -> None:
    outside = {name: re.findall(r"\(?`?(\.\./[^\s`)]+|/work/[^\s`)]+)", doc.text) for name, doc in docs.items()}
    assert {k: v for k, v in outside.items() if v} == {}


# -- Python names -------------------------------------------------------------------------------------------


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def dotted_names(doc: Doc) -> list[str]:
    """Spans like `saddler.procs.run_process_group` or `evodag.queries.lineage_train_outcomes()` (file names
    such as `saddler.toml` and `evodag.sqlite` are not Python names)."""
    names = []
    for span in doc.spans():
        for word in span.split():
            word = word.removesuffix("()")
            if re.fullmatch(rf"(?:{'|'.join(SOURCE_PACKAGES)})(?:\.\w+)+", word) and not re.search(
                r"\.(toml|sqlite|md|json|py|tsv)$", word
            ):
                names.append(word)
    return names


@cache
def string_literals() -> frozenset[str]:
    """Every string constant in the source: a dotted name that is one (the `saddler.benchmarks` entry-point
    group, an event kind) is a name the code uses, not a module path."""
    found: set[str] = set()
    for f in repo_files():
        if f.endswith(".py") and f.split("/", 1)[0] in SOURCE_PACKAGES:
            tree = ast.parse((REPO / f).read_text(encoding="utf-8"))
            found |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return frozenset(found)


@pytest.mark.parametrize("name", MAIN_DOCS)
def test_every_python_name_the_docs_give_resolves(docs: dict[str, Doc], name: str) -> None:
    unresolved = {n for n in dotted_names(docs[name]) if not _resolves(n) and n not in string_literals()}
    assert sorted(unresolved) == []


@cache
def class_members() -> dict[str, set[str]]:
    """Class name -> the names it defines (methods, class attributes, `self.x` assignments) across the source,
    with those of its base classes found there (`HarnessSpace` has what its mixins define)."""
    members: dict[str, set[str]] = {}
    bases: dict[str, set[str]] = {}
    for f in repo_files():
        if not f.endswith(".py") or f.split("/", 1)[0] not in SOURCE_PACKAGES:
            continue
        for node in ast.walk(ast.parse((REPO / f).read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            names = members.setdefault(node.name, set())
            bases.setdefault(node.name, set()).update(b.id for b in node.bases if isinstance(b, ast.Name))
            for item in ast.walk(node):
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
                    names |= {t.attr for t in item.targets if isinstance(t, ast.Attribute)}

    def inherited(cls: str, seen: frozenset[str] = frozenset()) -> set[str]:
        own = set(members.get(cls, set()))
        for base in bases.get(cls, set()) - seen - {cls}:
            own |= inherited(base, seen | {cls})
        return own

    return {cls: inherited(cls) for cls in members}


def member_names(doc: Doc) -> list[str]:
    """Spans like `RunContext.update_best`, `Optimizer.run()` or `Sandbox.uncontained()`."""
    return [span.removesuffix("()") for span in doc.spans() if re.fullmatch(r"[A-Z][a-z]\w*\.[a-z_]\w*(\(\))?", span)]


@pytest.mark.parametrize("name", MAIN_DOCS)
def test_every_class_member_the_docs_name_exists(docs: dict[str, Doc], name: str) -> None:
    missing = []
    for span in member_names(docs[name]):
        cls, attr = span.split(".")
        if span not in EXTERNAL_NAMES and attr not in class_members().get(cls, set()):
            missing.append(span)
    assert sorted(set(missing)) == []


def test_the_checks_catch_drift() -> None:
    assert exists("saddler/run/{folder,preflight,recovery}.py", anchored=True)
    assert not exists("saddler/run/{folder,nowhere}.py", anchored=True)
    assert exists("executor/sandbox.py", anchored=False) and not exists("cli_nowhere_*.py", anchored=False)
    assert exists("tests/live/", anchored=True) and exists("saddler/sessions/prompts/*.md", anchored=True)
    assert _resolves("saddler.procs.run_process_group") and not _resolves("saddler.procs.run_everything")
    assert "update_best" in class_members()["RunContext"]
    assert "worktree_change" in class_members()["HarnessSpace"]  # defined by its mixin DiffsMixin
    assert "worktree_change" not in class_members()["RunContext"]


@cache
def source_modules() -> tuple[str, ...]:
    return tuple(
        f.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for f in repo_files()
        if f.endswith(".py") and f.split("/", 1)[0] in SOURCE_PACKAGES
    )


def relative_names(doc: Doc) -> list[tuple[str, list[str]]]:
    """(span, candidate full names) for spans like `outcomes.evidence` or `cli.common.handle_errors`: a dotted
    name whose head is the tail of a source module's name (saddler.run.outcomes)."""
    out = []
    for span in doc.spans():
        name = span.removesuffix("()").replace("/", ".")
        if not re.fullmatch(r"[a-z_]+(?:\.[a-z_]+)*\.[A-Za-z_]\w*", name) or name.split(".", 1)[0] in SOURCE_PACKAGES:
            continue
        if re.search(r"\.(py|md|json|tsv|png|lock|toml|sqlite)$", name):  # a file name: the path checks' job
            continue
        head, attr = name.rsplit(".", 1)
        modules = [m for m in source_modules() if m.endswith(f".{head}")]
        if modules:
            out.append((span, [f"{m}.{attr}" for m in modules]))
    return out


@pytest.mark.parametrize("name", MAIN_DOCS)
def test_every_name_given_by_its_module_resolves(
    docs: dict[str, Doc], name: str, config_path_error: Callable[[str], str | None]
) -> None:
    """`outcomes.evidence` must be a name in some `….outcomes` module, unless it is a string the code uses
    (an event kind such as `evolution.invalid`) or a config key (`policies.score`)."""

    missing = sorted(
        span
        for span, candidates in relative_names(docs[name])
        if not any(_resolves(c) for c in candidates)
        and span not in string_literals()
        and config_path_error(span.removeprefix("run.")) is not None
    )
    assert missing == []


@pytest.mark.parametrize("name", MAIN_DOCS)
def test_every_class_the_docs_name_exists(docs: dict[str, Doc], name: str) -> None:
    """`RolloutResult`, `Evaluator`, `ChangedInputsError`: a class defined in saddler, evodag or benchmarks (or a
    builtin, or another project's, listed in EXTERNAL_NAMES)."""
    named = {s for s in docs[name].spans() if re.fullmatch(r"[A-Z][a-z][a-zA-Z0-9]*", s)}
    known = set(class_members()) | set(EXTERNAL_NAMES) | set(dir(builtins))
    assert sorted(named - known) == []

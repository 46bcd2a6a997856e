"""Names quoted in the code's docstrings exist: every backticked repository path (`saddler/run/loop.py`), module
path given relative to its package (`run/faults.py`), dotted Python name (`saddler.procs.run_process_group`) and
class member (`RunContext.update_best`) in a module, class or function docstring of saddler/ or evodag/ resolves,
or is listed in EXCEPTIONS with the reason. The same checks as the docs' (tests/docs/test_docs_paths.py), on the text
a maintainer reads beside the code."""

from __future__ import annotations

import ast
from functools import cache

import pytest
from plugins.docs import Doc
from test_docs_paths import (
    REPO,
    _resolves,
    class_members,
    dotted_names,
    exists,
    member_names,
    path_words,
    repo_files,
    string_literals,
)

PACKAGES = ("saddler", "evodag")
_FLEET_WORKDIR = "a file of a fleet's workdir that an eval command names, not of this repository"
EXCEPTIONS: dict[str, str] = {
    "saddler/modes/fleet/protect.py: eval.py": _FLEET_WORKDIR,
    "saddler/modes/fleet/protect.py: test_*.py": _FLEET_WORKDIR,
    "saddler/modes/fleet/protect.py: *_test.py": _FLEET_WORKDIR,
    "saddler/modes/fleet/protect.py: conftest.py": _FLEET_WORKDIR,
    "evodag/adhoc.py: Database.query": "sqlite-utils' Database.query, which the ad-hoc query runs through",
    "saddler/executor/zygote.py: Popen.returncode": "subprocess.Popen's returncode, which the zygote's handle mimics",
    "saddler/run/inputs.py: RunConfig.model_dump": "pydantic's BaseModel.model_dump, which RunConfig inherits",
}
"""`file: name` for quoted names that are right although they do not resolve here, each with the reason."""


@cache
def docstrings() -> tuple[Doc, ...]:
    """Every module, class and function docstring of the packages, as a Doc named `path:line`."""
    out = []
    for f in repo_files():
        if not f.endswith(".py") or f.split("/", 1)[0] not in PACKAGES:
            continue
        tree = ast.parse((REPO / f).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                text = ast.get_docstring(node, clean=False)
                if text:
                    out.append(Doc(f"{f}:{getattr(node, 'lineno', 1)}", text, [], text))
    return tuple(out)


def _key(doc: Doc, name: str) -> str:
    return f"{doc.name.rsplit(':', 1)[0]}: {name}"


def test_the_exceptions_are_still_needed() -> None:
    quoted = {_key(d, n) for d in docstrings() for n in [w for w, _ in path_words(d)] + dotted_names(d)} | {
        _key(d, m) for d in docstrings() for m in member_names(d)
    }
    assert sorted(set(EXCEPTIONS) - quoted) == []


def test_the_docstrings_are_read() -> None:
    assert len(docstrings()) > 500
    assert sum(len(path_words(d)) + len(dotted_names(d)) for d in docstrings()) > 50  # quoted names are found


def test_every_path_a_docstring_quotes_exists() -> None:
    missing = sorted(
        f"{d.name}: {word}"
        for d in docstrings()
        for word, anchored in path_words(d)
        if _key(d, word) not in EXCEPTIONS and not exists(word, anchored=anchored)
    )
    assert missing == []


def test_every_dotted_name_a_docstring_quotes_resolves() -> None:
    unresolved = sorted(
        f"{d.name}: {name}"
        for d in docstrings()
        for name in dotted_names(d)
        if _key(d, name) not in EXCEPTIONS and not _resolves(name) and name not in string_literals()
    )
    assert unresolved == []


def test_every_class_member_a_docstring_quotes_exists() -> None:
    missing = sorted(
        f"{d.name}: {span}"
        for d in docstrings()
        for span in member_names(d)
        if _key(d, span) not in EXCEPTIONS and span.split(".")[1] not in class_members().get(span.split(".")[0], set())
    )
    assert missing == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Runs in `run/nowhere.py`.", ["run/nowhere.py"]),
        ("See `saddler/run/nowhere.py`.", ["saddler/run/nowhere.py"]),
        ("Calls `saddler.procs.run_everything`.", ["saddler.procs.run_everything"]),
    ],
)
def test_the_checks_catch_a_stale_docstring(text: str, found: list[str]) -> None:
    doc = Doc("x.py:1", text, [], text)
    paths = [w for w, anchored in path_words(doc) if not exists(w, anchored=anchored)]
    names = [n for n in dotted_names(doc) if not _resolves(n)]
    assert paths + names == found

"""The fixed eval harness of a fleet (the 002 seed: "変更不可の評価ハーネス"): which workdir paths the agent must
not change, and the check of a change against them.

Default (when fleet.json has no `problem.protected`): the eval command's own files, read from the command:
every word naming a file or folder of the workdir (`python3 eval.py`, `bash bench.sh`, `pytest tests/`), for
`make T` the Makefile and the files its recipe for T names, for `npm run T` / `yarn T` / `pnpm T` package.json
and the files the script names, for pytest without paths the test files (`tests/`, `test/`, `test_*.py`,
`*_test.py`, `conftest.py`). Patterns are workdir-relative paths or globs; `dir/` (or a folder) covers
everything below it.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from pathlib import Path

_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
_RUNNERS = {"npm", "yarn", "pnpm"}
_TEST_FILES = ("tests/", "test/", "test_*.py", "*_test.py", "conftest.py")


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


def _files_named(words: list[str], workdir: Path) -> list[str]:
    out = []
    for word in words:
        word = word.lstrip("@").split("=", 1)[-1] if word.startswith("--") else word.lstrip("@")
        if not word or word.startswith("-") or word in (".", "..") or Path(word).is_absolute():
            continue
        path = workdir / word
        if path.is_file():
            out.append(Path(word).as_posix())
        elif path.is_dir():
            out.append(Path(word).as_posix().rstrip("/") + "/")
    return out


def _make_recipe(makefile: Path, target: str | None) -> list[str]:
    """The recipe lines of `target` (the first target when None)."""
    lines = makefile.read_text(encoding="utf-8", errors="replace").splitlines()
    recipe: list[str] = []
    inside = False
    for line in lines:
        head = re.match(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", line)
        if head:
            if inside:
                break
            inside = target is None or head.group(1) == target
            continue
        if inside and line.startswith("\t"):
            recipe.append(line.strip())
    return recipe


def eval_files(command: str, workdir: Path) -> list[str]:
    """The workdir files an eval command runs (see the module docstring), sorted."""
    workdir = Path(workdir)
    found: set[str] = set()
    for part in re.split(r"&&|\|\||;|\|", command):
        words = _words(part)
        if not words:
            continue
        found.update(_files_named(words, workdir))
        tool, args = Path(words[0]).name, words[1:]
        if tool == "make":
            makefile = next((workdir / n for n in _MAKEFILES if (workdir / n).is_file()), None)
            if makefile is not None:
                found.add(makefile.name)
                target = next((a for a in args if not a.startswith("-") and "=" not in a), None)
                for line in _make_recipe(makefile, target):
                    found.update(_files_named(_words(line), workdir))
        elif tool in _RUNNERS and (workdir / "package.json").is_file():
            found.add("package.json")
            name = args[1] if args[:1] == ["run"] and len(args) > 1 else (args[0] if args else "")
            try:
                scripts = json.loads((workdir / "package.json").read_text(encoding="utf-8")).get("scripts") or {}
            except (json.JSONDecodeError, AttributeError):
                scripts = {}
            if isinstance(scripts.get(name), str):
                found.update(_files_named(_words(scripts[name]), workdir))
        if "pytest" in words[:3] and not _files_named(args, workdir):
            found.update(p for p in _TEST_FILES if p.endswith("/") and (workdir / p).is_dir())
            found.update(p for p in _TEST_FILES if not p.endswith("/") and any(workdir.glob(p)))
    return sorted(found)


def touches(path: str, patterns: list[str]) -> bool:
    """True when the workdir-relative `path` is covered by one of `patterns`."""
    for pattern in patterns:
        pattern = pattern.strip().removeprefix("./")
        if not pattern:
            continue
        if pattern.endswith("/"):
            if path.startswith(pattern) or fnmatch.fnmatch(path, pattern + "*"):
                return True
        elif path == pattern or fnmatch.fnmatch(path, pattern) or path.startswith(pattern.rstrip("/") + "/"):
            return True
    return False


def protected_changes(changed: list[str], patterns: list[str]) -> list[str]:
    """The changed paths the agent was not allowed to touch."""
    return [p for p in changed if touches(p, patterns)]

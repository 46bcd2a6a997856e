"""Where an agent's executable and saddler itself are installed: the folders a sandbox must show for them to start.

bubblewrap (`saddler.sessions.confine`) mounts a private empty /tmp, so anything installed under /tmp (an npm
prefix, a virtualenv, an editable checkout) vanishes inside it unless it is bound again, read-only. These
functions name those folders; binding a folder outside /tmp again is harmless (it is visible read-only anyway).

- `executable_roots("pi")`: the PATH folder `pi` was found in, the folder of the file it resolves to, the install
  prefix of each (the parent of a `bin/` folder: an npm prefix's `lib/node_modules`, a virtualenv), the outermost
  `node_modules` folder it lies in (a local npm install's hoisted dependencies), and the same for the interpreter
  its `#!` line names (`#!/usr/bin/env node` is looked up on PATH).
- `saddler_roots()`: what saddler's own entry points need inside the sandbox (`evo-dag`, the guard hook): this
  interpreter (its virtualenv and base installation), every folder on `sys.path`, and the folders holding the
  `saddler` and `evodag` packages (an editable install's source tree).

A folder that contains a hidden mount point (`/`, or `/tmp` itself) is never returned: binding it would show the
real /tmp again.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

HIDDEN = (Path("/tmp"), Path("/dev"), Path("/proc"))  # what bwrap replaces (confine.bwrap_argv)
Which = Callable[..., str | None]


def executable_roots(name: str, *, path: str | None = None, which: Which = shutil.which) -> list[Path]:
    """The folders executable `name` needs to start (see module docstring); [] when it is not found."""
    found = which(name, path=path)
    if found is None:
        return []
    roots = _file_roots(Path(found))
    interpreter = _interpreter(Path(found).resolve(), path, which)
    if interpreter is not None:
        roots += _file_roots(interpreter)
    return _bindable(roots)


def saddler_roots() -> list[Path]:
    """The folders saddler's own entry points need inside the sandbox (see module docstring)."""
    import evodag
    import saddler

    roots = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), *_file_roots(Path(sys.executable))]
    roots += [Path(p) for p in sys.path if p]
    roots += [Path(module.__file__ or "").resolve().parent.parent for module in (saddler, evodag)]
    return _bindable(roots)


def _file_roots(file: Path) -> list[Path]:
    roots: list[Path] = []
    for path in (file.absolute(), file.resolve()):
        roots.append(path.parent)
        if path.parent.name == "bin":
            roots.append(path.parent.parent)
    modules = [p for p in file.resolve().parents if p.name == "node_modules"]
    if modules:
        roots.append(modules[-1])
    return roots


def _interpreter(script: Path, path: str | None, which: Which) -> Path | None:
    """The interpreter a script's `#!` line names (`env X` looked up on PATH), or None for a binary."""
    try:
        with script.open("rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        names = [w for w in words[1:] if not w.startswith("-")]
        found = which(names[0], path=path) if names else None
        return Path(found) if found else None
    return Path(words[0])


def _bindable(paths: Iterable[Path]) -> list[Path]:
    """`paths` that exist, without duplicates, and none that holds a hidden mount point."""
    out: list[Path] = []
    for path in dict.fromkeys(p.absolute() for p in paths):
        if path.is_dir() and not any(h == path or h.is_relative_to(path) for h in HIDDEN):
            out.append(path)
    return out

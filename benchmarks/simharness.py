"""Loading an untrusted harness folder into this process, and finding the harness file at fault: the harness loader
the bundled simulated benchmarks (opsdesk, repofix) share.

Contract: `load_harness(root, prefix, marker, hook_names)` reads `prompts/*.md` (the system prompt, `system.md`
first) and imports `tools/*.py` (functions carrying the attribute `marker` = (name, description)), `middleware/*.py`
(`after_tool`), `hooks/*.py` (each of `hook_names`) and `loop.py` (`run`), each under a module name no other harness
shares and without writing bytecode into the harness (`load_module` keeps compiled code in this process, keyed by
path and source). An exception raised while importing a harness file carries its harness-relative path in
`HARNESS_FILE_ATTR`; `harness_failure` turns any exception in harness code into (the harness file at fault, the
traceback's tail). Rollout children import this module: it imports only the stdlib at run time.
"""

from __future__ import annotations

import importlib.util
import itertools
import os

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType, ModuleType
    from typing import Any

HARNESS_FILE_ATTR = "__harness_file__"  # set on an exception raised while importing harness code
_COUNTER = itertools.count()


def harness_files(root: str, folder: str, suffix: str) -> list[str]:
    """Harness-relative paths of `folder/*suffix`, sorted."""
    base = os.path.join(root, folder)
    if not os.path.isdir(base):
        return []
    return [
        f"{folder}/{n}"
        for n in sorted(os.listdir(base))
        if n.endswith(suffix) and os.path.isfile(os.path.join(base, n))
    ]


_CODE: dict[tuple[str, bytes], CodeType] = {}  # (path, source) -> code: one process loading a harness again
_CODE_MAX = 1024


def load_module(root: str, rel: str, prefix: str) -> ModuleType:
    """Import `root/rel` under a name no other harness shares; never writes bytecode into the harness (the code
    object is kept in this process instead, keyed by path and source: a file compiles once per process however
    many rollouts load it). An exception carries the harness-relative path in `HARNESS_FILE_ATTR`."""
    try:
        path = os.path.join(root, rel)
        name = f"_{prefix}_harness_{next(_COUNTER)}_" + rel.replace("/", "_").removesuffix(".py")
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {rel}")
        module = importlib.util.module_from_spec(spec)
        with open(path, "rb") as fh:
            source = fh.read()
        code = _CODE.get((path, source))
        if code is None:
            code = compile(source, path, "exec", dont_inherit=True)  # what the file loader's source_to_code does
            if len(_CODE) >= _CODE_MAX:
                _CODE.clear()
            _CODE[(path, source)] = code
        exec(code, module.__dict__)  # importing the harness is what a rollout does
        return module
    except Exception as exc:
        setattr(exc, HARNESS_FILE_ATTR, rel)
        raise


class ToolSpec:
    """A registered harness tool; `file` is its harness-relative path."""

    def __init__(self, name: str, description: str, fn: Callable[..., Any], file: str) -> None:
        self.name, self.description, self.fn, self.file = name, description, fn, file


class Harness:
    """Everything loaded from one harness folder. `hooks` maps each hook name to the functions defining it, in
    file order; `hook_files` maps id(an `after_tool` hook) to its file."""

    def __init__(self, system_prompt: str, hook_names: tuple[str, ...]) -> None:
        self.system_prompt = system_prompt
        self.tools: dict[str, ToolSpec] = {}
        self.middleware: list[Callable[..., Any]] = []
        self.hooks: dict[str, list[Callable[..., Any]]] = {name: [] for name in hook_names}
        self.hook_files: dict[int, str] = {}
        self.run: Callable[[Any], Any] = lambda session: None


def load_harness(root: str | os.PathLike[str], prefix: str, marker: str, hook_names: tuple[str, ...]) -> Harness:
    """Read `prompts/*.md`; import `tools/*.py` (functions carrying the attribute `marker` = (name, description)),
    `middleware/*.py` (`after_tool`), `hooks/*.py` (each of `hook_names`) and `loop.py` (`run`). Import errors
    propagate, tagged with the harness file, for the runner to turn into a failed rollout."""
    root = os.fspath(root)
    harness = Harness(prompt_text(root), hook_names)
    for folder in ("tools", "middleware", "hooks"):
        for rel in harness_files(root, folder, ".py"):
            module = load_module(root, rel, prefix)
            if folder == "tools":
                for value in vars(module).values():
                    mark = getattr(value, marker, None)
                    if callable(value) and mark:
                        harness.tools[mark[0]] = ToolSpec(mark[0], mark[1], value, rel)
            elif folder == "middleware" and callable(getattr(module, "after_tool", None)):
                harness.middleware.append(module.after_tool)
            elif folder == "hooks":
                for name in hook_names:
                    if callable(getattr(module, name, None)):
                        harness.hooks[name].append(getattr(module, name))
                        if name == "after_tool":
                            harness.hook_files[id(module.after_tool)] = rel
    loop = load_module(root, "loop.py", prefix)
    if not callable(getattr(loop, "run", None)):
        raise ImportError("loop.py defines no run(session)")
    harness.run = loop.run
    return harness


def prompt_text(root: str) -> str:
    """`prompts/*.md` joined by blank lines, `prompts/system.md` first: the system prompt."""
    prompts = sorted(harness_files(root, "prompts", ".md"), key=lambda p: (p != "prompts/system.md", p))
    texts = []
    for rel in prompts:
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            texts.append(fh.read())
    return "\n\n".join(texts)


def harness_frame(tb: Any, root: str, fallback: str | None) -> str | None:
    """The harness-relative path of the deepest traceback frame inside `root` (else `fallback`)."""
    base = os.path.realpath(root) + os.sep
    for frame in reversed(tb):
        path = os.path.realpath(frame.filename)
        if path.startswith(base):
            return path[len(base) :].replace(os.sep, "/")
    return fallback


def harness_failure(exc: BaseException, root: str) -> tuple[str | None, str]:
    """(the harness file at fault, the traceback's last 1500 characters) of an exception in harness code."""
    import traceback

    tb = traceback.extract_tb(exc.__traceback__)
    failure_file = harness_frame(tb, root, getattr(exc, HARNESS_FILE_ATTR, None))
    return failure_file, "".join(traceback.format_exception(exc)).strip()[-1500:]

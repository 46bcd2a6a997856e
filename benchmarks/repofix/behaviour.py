"""What the code of a checkout does, as its tests would find out: the one source of truth for the visible test
runs, the agent's reproduction scripts and the hidden grader.

- a module *fails to load* when it does not compile or one of its `from <repo module> import names` does not
  resolve to a source module (never a `build/` copy) that defines the names;
- a function is *broken* when its normalized text differs from the original and it is not a planted site
  (sites are judged by `site_state`), or when it is a caller of a wrapper whose default changed;
- a site is `fixed`, `partial` (the reported case only), `unfixed`, `wrong` (any other change) or `missing`.
"""

from __future__ import annotations

from benchmarks.repofix.analysis import functions, imports, normalize, syntax_error

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any


def is_source(path: str) -> bool:
    """A module the package imports: under a `src/` folder and not a test or build copy."""
    return path.endswith(".py") and "/src/" in f"/{path}" and not path.startswith("build/")


def module_name(path: str) -> str:
    """`src/pkg/mod.py` -> `pkg.mod` (the import name of a source module)."""
    return f"/{path}".removesuffix(".py").split("/src/")[-1].replace("/", ".")


class Behaviour:
    """A snapshot of what the checkout's code does (build a new one after files change)."""

    def __init__(self, spec: Any, files: dict[str, str], original: dict[str, str]) -> None:
        self.spec, self.files, self.original = spec, files, original
        self.sites: list[dict[str, Any]] = spec.params["sites"]
        self._errors: dict[str, str] = {}
        self.by_module = {module_name(p): p for p in files if is_source(p)}
        self.site_funcs = {(s["path"], s["func"]) for s in self.sites if s["func"]}
        helper = next((s["helper"] for s in self.sites if "helper" in s), None)
        self.helper = helper
        self.helper_changed = helper is not None and self._helper_overbroad(helper)

    # modules ------------------------------------------------------------------------------------------------
    def funcs(self, path: str) -> dict[str, str]:
        return functions(self.files.get(path, ""))

    def load_error(self, path: str) -> str:
        """'' when the module compiles and its repository imports resolve, else the error a test run shows."""
        if path in self._errors:
            return self._errors[path]
        text = self.files.get(path)
        if text is None:
            error = "ModuleNotFoundError: the module was deleted"
        else:  # the checkout's own files compile (a test checks it)
            error = "" if text == self.original.get(path) else syntax_error(text, path)
        if not error and text is not None:
            packages = {m.split(".")[0] for m in self.by_module}
            for module, names, _line in imports(text):
                if module.split(".")[0] not in packages:
                    continue
                target = self.by_module.get(module)
                if target is None:
                    error = f"ModuleNotFoundError: No module named '{module}'"
                    break
                missing = [n for n in names if n not in self.funcs(target)]
                if missing:
                    error = f"ImportError: cannot import name '{missing[0]}' from '{module}' ({target})"
                    break
        self._errors[path] = error
        return error

    def changed_sources(self) -> list[str]:
        return sorted(p for p in self.files if is_source(p) and self.files[p] != self.original.get(p))

    # functions ----------------------------------------------------------------------------------------------
    def broken(self, path: str) -> list[str]:
        """Functions of a source module whose behaviour its visible tests would see changed."""
        if self.load_error(path):
            return list(functions(self.original.get(path, "")))
        if self.files.get(path) == self.original.get(path) and not self.helper_changed:
            return []
        out = []
        before = functions(self.original.get(path, ""))
        now = self.funcs(path)
        for name, text in before.items():
            if (path, name) in self.site_funcs:
                continue
            changed = name not in now or normalize(now[name]) != normalize(text)
            if changed or (self.helper_changed and self._calls_helper_by_default(text)):
                out.append(name)
        return out

    def _calls_helper_by_default(self, text: str) -> bool:
        assert self.helper is not None
        name = self.helper["func"]
        if text.lstrip().startswith(f"def {name}("):
            return True
        return f"{name}(" in text and "=True" not in text.split(f"{name}(", 1)[1].split("\n")[0]

    def _helper_overbroad(self, helper: dict[str, Any]) -> bool:
        text = self.funcs(helper["path"]).get(helper["func"], "")
        return normalize(helper["overbroad"]) in normalize(text)

    # sites --------------------------------------------------------------------------------------------------
    def site_state(self, index: int) -> str:
        """fixed | partial | unfixed | wrong | missing (a module that does not load counts as missing)."""
        site = self.sites[index]
        path = site["path"]
        if site["kind"] == "import":
            if path not in self.files:
                return "missing"
            found = [(m, line) for m, names, line in imports(self.files[path]) if site["symbol"] in names]
            if not found:
                return "missing"
            module = found[0][0]
            if self.load_error(path):
                return "unfixed" if f"from {module} import" in site["buggy"] else "wrong"
            return "fixed" if self.by_module.get(module) == site["home"] else "wrong"
        if self.load_error(path):
            return "missing"
        now = self.funcs(path).get(site["func"])
        orig = functions(self.original[path]).get(site["func"], "")
        if now is None:
            return "missing"
        got = normalize(now)
        if got == normalize(orig):
            return "fixed" if self.helper_changed else "unfixed"  # a changed default fixes it for every caller
        fixes = site["fixed"]
        if any(got == normalize(orig.replace(site["buggy"], f)) for f in fixes):
            return "fixed"
        if "partial" in site and got == normalize(orig.replace(site["buggy"], site["partial"])):
            return "partial"
        return "wrong"

    def case_passes(self, index: int, case: str) -> bool:
        """Whether the hidden test of `case` passes for site `index` (edge cases accept a partial fix
        for the reported case)."""
        state = self.site_state(index)
        return state == "fixed" or (state == "partial" and case not in ("none",))

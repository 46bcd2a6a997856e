"""The 120 repofix tasks: ten bug reports per repository, planted deterministically, with their hidden tests.

A task's checkout is the repository's generated code with the task's functions inserted (`task_files`). Its
hidden parameters (never shown to the harness) name the sites to fix, the accepted fixes, the fail-to-pass
tests that need them and the modules whose pass-to-pass tests guard them.
"""

from __future__ import annotations

import random
from functools import cache

from benchmarks.repofix import bugs
from benchmarks.repofix.repos import (
    NOUNS,
    REPO_BY_ID,
    REPOS,
    Module,
    Repo,
    base_modules,
    docs_text,
    module_text,
    restyle,
    style_config,
    test_text,
)
from benchmarks.simmodel import TaskSpec

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any


TIMING_EVERY = 3  # a flaky repository has a timing-dependent test in every third module's test file
CHANGELOG_MENTIONS = 9  # release notes that mention a task's search term, in a large repository
CHANGELOG_NOTES = ["documented", "faster on large inputs", "type hints", "now public", "docstring fixed"]
TIMING_TEST = '''

def test_MOD_timing():
    """Timing-dependent: fails now and then on a loaded machine."""
    assert elapsed_under(0.05)
'''
ORDER_TEST = """

def test_FUNC_order():
    assert FUNC(SAMPLE) == "a, b"
"""


class _Plan:
    """What one task adds to the repository while it is being planted."""

    def __init__(self, repo: Repo, rng: random.Random, index: int) -> None:
        self.repo, self.rng, self.index = repo, rng, index
        self.modules = [m for m in base_modules(repo.id)]
        self.inserts: dict[str, list[tuple[str, str, int]]] = {}  # module path -> [(func, text, position)]
        self.imports: dict[str, list[str]] = {}
        self.extra: dict[str, str] = {}  # other files (a stale build copy)
        self.order_test: tuple[str, str] | None = None  # (module path, func) of a flaky visible test
        self.docs: list[str] = []
        self.noun = rng.choice(NOUNS)

    def module(self, exclude: tuple[str, ...] = ()) -> Module:
        return self.rng.choice([m for m in self.modules if m.path not in exclude])

    def add(self, module: Module, func: str, text: str, before: str = "") -> None:
        """Plant `func` at a seeded place of `module` (or just ahead of the planted function `before`)."""
        slots = self.inserts.setdefault(module.path, [])
        if before:
            at = next(i for i, slot in enumerate(slots) if slot[0] == before)
            slots.insert(at, (func, self.fill(text), slots[at][2] - self.rng.randint(0, 2)))
        else:
            n = len(module.functions)
            slots.append((func, self.fill(text), self.rng.randint(n // 3, n)))

    def fill(self, text: str) -> str:
        return text.replace("NOUN", self.noun)

    def site(self, module: Module, func: str, variant: dict[str, Any], kind: str, **extra: Any) -> dict[str, Any]:
        repo = self.repo
        site = {
            "path": module.path,
            "module": module.import_name,
            "test_path": module.test_path,
            "func": func,
            "buggy": restyle(self.fill(variant["buggy"]), repo),
            "fixed": [restyle(self.fill(f), repo) for f in variant["fixed"]],
            "kind": kind,
            "decoy": False,
        }
        for key in ("slip", "partial"):
            if key in variant:
                site[key] = restyle(self.fill(variant[key]), repo)
        site.update(extra)
        return site


def _single(plan: _Plan, family: str, variants: list[dict[str, Any]]) -> dict[str, Any]:
    variant = variants[plan.index % len(variants)]
    module = plan.module()
    func = plan.fill(variant["func"])
    plan.add(module, func, variant["text"])
    site = plan.site(module, func, variant, family)
    if plan.repo.repetitive and "decoy" in variant:
        site["decoy"] = func_name(plan.fill(variant["decoy"]))
        plan.add(module, site["decoy"], variant["decoy"], before=func)
    f2p = [(f"test_{func}_{case}", [0], case) for case in variant.get("cases", ("issue",))]
    params = {
        "sites": [site],
        "f2p": f2p,
        "p2p": [module.test_path],
        "search": func,
        "issue": plan.fill(variant.get("issue", "")),
    }
    if family == "flaky_test":
        plan.order_test = (module.path, func)
        params["f2p"] = [(f"test_{func}_deterministic", [0], "issue")]
        params["issue"] = bugs.FLAKY_ISSUE.replace("TEST", f"{module.test_path}::test_{func}_order")
        params["flaky_test"] = f"{module.test_path}::test_{func}_order"
    return params


def func_name(text: str) -> str:
    """The name a `def` text defines."""
    return text.split("(")[0].removeprefix("def ")


def _api_misuse(plan: _Plan) -> dict[str, Any]:
    variant = bugs.API_MISUSE[plan.index % len(bugs.API_MISUSE)]
    helper_module = plan.module()
    module = plan.module(exclude=(helper_module.path,))
    func = plan.fill(variant["func"])
    helper = variant["helper_func"]
    plan.add(helper_module, helper, variant["helper"])
    if variant["helper_import"]:
        plan.imports.setdefault(helper_module.path, []).append(variant["helper_import"])
    plan.imports.setdefault(module.path, []).append(f"from {helper_module.import_name} import {helper}")
    plan.add(module, func, variant["text"])
    other = plan.module(exclude=(helper_module.path, module.path))
    decoy = plan.fill(variant["decoy"])
    caller = f"{helper}_{plan.noun}_report"
    plan.add(other, caller, decoy.replace(func_name(decoy), caller))
    plan.imports.setdefault(other.path, []).append(f"from {helper_module.import_name} import {helper}")
    site = plan.site(module, func, variant, "api_misuse")
    site["helper"] = {
        "path": helper_module.path,
        "func": helper,
        "def": restyle(variant["helper_def"], plan.repo),
        "overbroad": restyle(variant["helper_overbroad"], plan.repo),
        "test_path": helper_module.test_path,
    }
    if plan.repo.repetitive:
        site["decoy"] = func_name(decoy)
        plan.add(module, site["decoy"], decoy, before=func)
    p2p = [module.test_path, helper_module.test_path, other.test_path]
    return {"sites": [site], "f2p": [(f"test_{func}", [0], "issue")], "p2p": p2p, "search": func,
            "issue": plan.fill(variant["issue"])}  # fmt: skip


def _wrong_import(plan: _Plan) -> dict[str, Any]:
    variant = bugs.WRONG_IMPORT[plan.index % len(bugs.WRONG_IMPORT)]
    symbol = plan.fill(variant["symbol"])
    home = plan.module()
    user = plan.module(exclude=(home.path,))
    package = user.import_name.rsplit(".", 1)[0]
    plan.add(home, symbol, bugs.WRONG_IMPORT_DEF.replace("SYMBOL", symbol))
    plan.add(user, f"tidy_{plan.noun}", bugs.WRONG_IMPORT_USER.replace("SYMBOL", symbol))
    buggy = f"from {package}.{variant['old']} import {symbol}"
    plan.imports.setdefault(user.path, []).append(buggy)
    stale = f"{package}.{variant['stale']}"
    if plan.repo.size == "large":
        stale_path = "build/lib/" + stale.replace(".", "/") + ".py"
        plan.extra[stale_path] = restyle(
            '"""Stale build output."""\n\n\n' + plan.fill(bugs.WRONG_IMPORT_DEF.replace("SYMBOL", symbol)), plan.repo
        )
        plan.docs += [f"- `{stale}.{symbol}` moved to `{home.import_name}.{symbol}`", ""]
    site = {
        "path": user.path, "module": user.import_name, "test_path": user.test_path, "func": "", "kind": "import",
        "buggy": buggy, "fixed": [f"from {home.import_name} import {symbol}"],
        "slip": f"from {stale} import {symbol}", "decoy": False, "symbol": symbol, "home": home.path,
    }  # fmt: skip
    issue = (
        f'`import {user.import_name}` fails:\n\n    File "{user.path}", line 3, in <module>\n'
        f"      {buggy}\n  ImportError: cannot import name '{symbol}' from '{package}.{variant['old']}'"
    )
    f2p = [(f"test_{user.name}_imports", [0], "issue"), (f"test_tidy_{plan.noun}", [0], "issue")]
    return {"sites": [site], "f2p": f2p, "p2p": [home.test_path], "search": symbol, "issue": issue}


def _multi_file(plan: _Plan) -> dict[str, Any]:
    variant = bugs.MULTI_FILE[plan.index % len(bugs.MULTI_FILE)]
    old, new, value = variant["old"], variant["new"], variant["value"]
    reader_module = plan.module()
    used = [reader_module.path]
    plan.add(reader_module, f"read_{new}", bugs.MULTI_READER.replace("NEW", new).replace("VALUE", value))
    sites: list[dict[str, Any]] = []
    f2p: list[tuple[str, list[int], str]] = [(f"test_read_{new}", [], "issue")]
    for where in ("cli", "env", "file")[: 2 + (plan.index % 2)]:
        module = plan.module(exclude=tuple(used))
        used.append(module.path)
        func = f"apply_{where}_settings"
        text = bugs.MULTI_WRITER.replace("WHERE", where).replace("OLD", old).replace("NEW", new)
        plan.add(module, func, text)
        line = f'    settings["{old}"] = value'
        fixed = f'    settings["{new}"] = value'
        variant_site = {"buggy": line, "fixed": [fixed], "slip": f'    settings["{new.upper()}"] = value'}
        sites.append(plan.site(module, func, variant_site, "multi_file"))
        f2p.append((f"test_{func}_uses_{new}", [len(sites) - 1], "issue"))
    f2p[0] = (f2p[0][0], list(range(len(sites))), "issue")
    plan.docs += [f"- the `{old}` setting (see `{new}`)", f"- `{old}` is read at start-up", ""]
    issue = (
        f"Setting `{new}` has no effect: the settings writers still store it under its old name `{old}`, and "
        f"`read_{new}` only knows the new name."
    )
    p2p = sorted({reader_module.test_path, *(s["test_path"] for s in sites)})
    return {"sites": sites, "f2p": f2p, "p2p": p2p, "search": old, "issue": issue, "reader": f"read_{new}",
            "new_key": new}  # fmt: skip


def _plant(repo: Repo, family: str, index: int, rng: random.Random) -> tuple[dict[str, Any], _Plan]:
    plan = _Plan(repo, rng, index)
    if family == "off_by_one":
        params = _single(plan, family, bugs.OFF_BY_ONE)
    elif family == "edge_case":
        params = _single(plan, family, bugs.EDGE_CASE)
    elif family == "flaky_test":
        params = _single(plan, family, bugs.FLAKY)
    elif family == "api_misuse":
        params = _api_misuse(plan)
    elif family == "wrong_import":
        params = _wrong_import(plan)
    elif family == "multi_file":
        params = _multi_file(plan)
    else:
        raise ValueError(f"unknown family {family}")
    params["overlay"] = {"inserts": plan.inserts, "imports": plan.imports, "extra": plan.extra,
                         "order_test": plan.order_test, "docs": plan.docs}  # fmt: skip
    return params, plan


@cache
def repo_tasks(repo_id: str) -> tuple[TaskSpec, ...]:
    """The repository's task specs, in a fixed order."""
    repo = REPO_BY_ID[repo_id]
    rng = random.Random(f"repofix|{repo.id}|tasks")
    specs, i = [], 0
    for family, count in repo.families:
        for _ in range(count):
            i += 1
            params, _plan = _plant(repo, family, i, rng)
            title = params["issue"].split("\n")[0]
            prompt = f"[repository {repo.id}; Python; tests run with pytest] Issue #{100 + i}: {title}"
            if "\n" in params["issue"]:
                prompt += "\n" + params["issue"].split("\n", 1)[1]
            specs.append(TaskSpec(f"{repo.id}-{i:02d}", repo.id, repo.split, family, prompt, params))
    return tuple(specs)


def all_specs() -> list[TaskSpec]:
    return [s for r in REPOS for s in repo_tasks(r.id)]


def spec_by_id(task_id: str) -> TaskSpec:
    """The spec of `task_id`; KeyError for an unknown id."""
    repo_id = task_id.rsplit("-", 1)[0]
    if repo_id not in REPO_BY_ID:
        raise KeyError(task_id)
    for spec in repo_tasks(repo_id):
        if spec.id == task_id:
            return spec
    raise KeyError(task_id)


_FILES: dict[str, dict[str, str]] = {}


def task_files(spec: TaskSpec) -> dict[str, str]:
    """The task's checkout: every file of the repository with the task's code planted (path -> text); a new dict
    each call (built once per task and process)."""
    if spec.id not in _FILES:
        _FILES[spec.id] = _build_files(spec)
    return dict(_FILES[spec.id])


def _build_files(spec: TaskSpec) -> dict[str, str]:
    repo = REPO_BY_ID[spec.group]
    overlay = spec.params["overlay"]
    files: dict[str, str] = {}
    modules = base_modules(repo.id)
    listed: list[tuple[str, list[str]]] = []
    for module in modules:
        planted = overlay["inserts"].get(module.path, [])
        ordered: dict[str, str] = {}
        for i, (name, text) in enumerate([*module.functions.items(), ("", "")]):
            ordered.update(
                (func, body) for func, body, position in planted if min(position, len(module.functions)) == i
            )
            if name:
                ordered[name] = text
        files[module.path] = module_text(repo, module, ordered, overlay["imports"].get(module.path, []))
        extra = ""
        if overlay["order_test"] and overlay["order_test"][0] == module.path:
            extra += ORDER_TEST.replace("FUNC", overlay["order_test"][1])
        if repo.flaky and modules.index(module) % TIMING_EVERY == 0:
            extra += TIMING_TEST.replace("MOD", module.name)
        files[module.test_path] = test_text(repo, module, list(ordered), extra)
        listed.append((module.import_name, list(ordered)))
        if repo.size == "large":
            files["build/lib/" + module.import_name.replace(".", "/") + ".py"] = files[module.path]
    if repo.size == "large":
        files["docs/api.md"] = docs_text(repo.id, listed)
        files["docs/changelog.md"] = changelog_text(spec)
    if repo.max_line:
        files["tests/test_style.py"] = restyle('def test_flake8():\n    assert run_flake8("src") == []\n', repo)
    config_path, config = style_config(repo)
    files[config_path] = config
    files.update(overlay["extra"])
    return files


def changelog_text(spec: TaskSpec) -> str:
    """`docs/changelog.md` of a large repository: past releases keep mentioning what the task is about."""
    term = spec.params["search"]
    lines = ["# Changelog", ""]
    for release in range(CHANGELOG_MENTIONS, 0, -1):
        lines += [f"## 0.{release}.0", "", f"- `{term}`: {CHANGELOG_NOTES[release % len(CHANGELOG_NOTES)]}", ""]
    return "\n".join(lines + spec.params["overlay"]["docs"]) + "\n"

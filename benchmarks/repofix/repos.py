"""The twelve repositories (groups) of repofix and their generated code: layout, size, test runtime, style rules.

A repository is generated deterministically from its id: modules of small Python functions (valid code: the
grader compiles what the agent leaves), one test file per module, and, in large repositories, a stale
`build/lib/` copy and API docs that crowd a plain search. Splits are held out by repository, as the paper's
SWE-Bench Pro setting is: four train, four dev, four test repositories.
"""

from __future__ import annotations

import random
from functools import cache

# style name -> (max line length or 0 for unchecked, indent unit, quote character)
STYLES: dict[str, tuple[int, int, str]] = {
    "black": (88, 4, '"'),
    "pep8": (79, 4, "'"),
    "twospace": (80, 2, "'"),
    "none": (0, 4, '"'),
}
SIZES = {"small": (5, 7), "medium": (9, 30), "large": (14, 60)}  # size -> (modules, functions per module)
MODULES = [
    "parser", "render", "client", "config", "cache", "export", "report", "schema", "paths", "retry", "storage",
    "metrics", "session", "filters", "history", "layout", "tokens", "batch", "events", "shapes", "units", "index",
]  # fmt: skip
VERBS = ["load", "parse", "render", "merge", "split", "count", "clean", "scale", "group", "pick", "trim", "encode"]
NOUNS = [
    "rows", "labels", "tags", "points", "frames", "names", "chunks", "spans", "keys", "values", "items", "pages",
    "cells", "fields", "lines", "nodes", "steps", "ticks", "notes", "words", "slots", "edges", "specs", "rules",
]  # fmt: skip
VERB_FILLER = {"parse": 0, "clean": 0, "load": 1, "render": 2, "trim": 2, "split": 3, "scale": 4, "count": 5,
               "group": 5, "merge": 6, "encode": 6, "pick": 7}  # fmt: skip
FILLERS = [
    '''def {name}({arg}):
    """Return the {noun} of {arg} that are set."""
    result = []
    for item in {arg}:
        if item is None:
            continue
        result.append(item)
    return result
''',
    '''def {name}({arg}, default=None):
    """Look up the {noun} value, or the default."""
    if not {arg}:
        return default
    key = {q}{noun}{q}
    return {arg}.get(key, default)
''',
    '''def {name}({arg}, width=72):
    """Format the {noun} for display."""
    text = str({arg}).strip()
    if len(text) > width:
        text = text[: width - 3] + {q}...{q}
    return text
''',
    '''def {name}({arg}):
    """Differences between consecutive {noun}."""
    steps = []
    for i in range(len({arg}) - 1):
        steps.append({arg}[i + 1] - {arg}[i])
    return steps
''',
    '''def {name}({arg}, factor=1.0):
    """Scale every one of the {noun} by the factor."""
    return [value * factor for value in {arg}]
''',
    '''def {name}({arg}):
    """Count the {noun} per kind."""
    counts = {{}}
    for item in {arg}:
        kind = item.get({q}kind{q}, {q}other{q})
        counts[kind] = counts.get(kind, 0) + 1
    return counts
''',
    '''def {name}({arg}, sep={q},{q}):
    """Join the {noun} into one line."""
    parts = [str(part).strip() for part in {arg}]
    return sep.join(part for part in parts if part)
''',
    '''def {name}({arg}, limit=100):
    """The first {noun}, at most limit of them."""
    if limit <= 0:
        return []
    return list({arg})[:limit]
''',
]


class Repo:
    """One repository. `families` lists (family, count) in task order."""

    __slots__ = ("families", "flaky", "id", "layout", "package", "repetitive", "size", "split", "style", "suite_s")

    def __init__(
        self,
        id: str,
        split: str,
        size: str,
        suite_s: float,
        layout: str,
        style: str,
        flaky: float,
        repetitive: bool,
        families: str,
    ) -> None:
        self.id, self.split, self.size, self.suite_s = id, split, size, suite_s
        self.layout = layout  # flat | monorepo (two packages whose test folders share file names)
        self.style = style  # a key of STYLES
        self.flaky = flaky  # chance that the timing-dependent test fails on a run (0: the repo has none)
        self.repetitive = repetitive  # copy-pasted helpers: a buggy line also appears, correct, in a sibling
        self.package = id.replace("-", "")
        self.families = tuple((f.split(":")[0], int(f.split(":")[1])) for f in families.split())

    @property
    def max_line(self) -> int:
        return STYLES[self.style][0]

    @property
    def indent(self) -> int:
        return STYLES[self.style][1]

    @property
    def quote(self) -> str:
        return STYLES[self.style][2]

    def packages(self) -> list[tuple[str, str]]:
        """(import name, source folder) of each package: one for a flat repo, two for a monorepo."""
        if self.layout == "monorepo":
            return [(f"{self.package}_{p}", f"packages/{p}/src/{self.package}_{p}") for p in ("core", "cli")]
        return [(self.package, f"src/{self.package}")]

    def tests_dir(self, source_dir: str) -> str:
        return source_dir.split("/src/")[0] + "/tests" if self.layout == "monorepo" else "tests"


REPOS: tuple[Repo, ...] = (
    Repo("tinyjson", "train", "small", 12, "flat", "black", 0.0, False,
         "off_by_one:3 edge_case:3 api_misuse:2 wrong_import:2"),
    Repo("logpipe", "train", "medium", 70, "flat", "none", 0.25, True,
         "api_misuse:3 flaky_test:2 off_by_one:3 multi_file:2"),
    Repo("geodesy", "train", "large", 150, "flat", "black", 0.0, False,
         "multi_file:3 wrong_import:3 off_by_one:2 edge_case:2"),
    Repo("shopcart", "train", "medium", 40, "monorepo", "black", 0.0, True,
         "multi_file:3 api_misuse:3 edge_case:2 flaky_test:2"),
    Repo("mailmerge", "dev", "small", 20, "flat", "pep8", 0.3, False,
         "edge_case:3 off_by_one:3 flaky_test:2 api_misuse:2"),
    Repo("tilestore", "dev", "large", 480, "flat", "black", 0.0, True,
         "off_by_one:3 wrong_import:3 multi_file:2 edge_case:2"),
    Repo("authkit", "dev", "medium", 90, "monorepo", "twospace", 0.0, False,
         "multi_file:3 api_misuse:3 wrong_import:2 edge_case:2"),
    Repo("csvtools", "dev", "medium", 60, "flat", "none", 0.3, True,
         "api_misuse:3 flaky_test:3 off_by_one:2 multi_file:2"),
    Repo("feedparse", "test", "medium", 360, "flat", "pep8", 0.3, False,
         "edge_case:3 api_misuse:3 flaky_test:2 off_by_one:2"),
    Repo("orbitdb", "test", "large", 420, "monorepo", "black", 0.0, True,
         "multi_file:3 wrong_import:3 off_by_one:2 api_misuse:2"),
    Repo("plotlite", "test", "small", 15, "flat", "twospace", 0.0, True,
         "off_by_one:3 edge_case:3 api_misuse:2 multi_file:2"),
    Repo("taskq", "test", "medium", 80, "flat", "none", 0.35, False,
         "flaky_test:3 api_misuse:3 multi_file:2 edge_case:2"),
)  # fmt: skip
REPO_BY_ID = {r.id: r for r in REPOS}


def restyle(text: str, repo: Repo) -> str:
    """Code written with 4-space indents and double quotes, in the repository's own indent unit and quotes."""
    if repo.indent != 4:
        lines = []
        for line in text.split("\n"):
            stripped = line.lstrip(" ")
            depth = (len(line) - len(stripped)) // 4
            lines.append(" " * (depth * repo.indent) + stripped)
        text = "\n".join(lines)
    if repo.quote == "'":
        text = text.replace('"""', "\0").replace('"', "'").replace("\0", '"""')
    return text


class Module:
    """One generated source module: its import name, path, test file and functions (name -> source text)."""

    __slots__ = ("functions", "import_name", "name", "path", "test_path")

    def __init__(self, name: str, import_name: str, path: str, test_path: str) -> None:
        self.name, self.import_name, self.path, self.test_path = name, import_name, path, test_path
        self.functions: dict[str, str] = {}


@cache
def base_modules(repo_id: str) -> tuple[Module, ...]:
    """The repository's modules with their filler functions (tasks add their own functions to them)."""
    repo = REPO_BY_ID[repo_id]
    rng = random.Random(f"repofix|{repo_id}|code")
    n_modules, n_funcs = SIZES[repo.size]
    names = rng.sample(MODULES, n_modules)
    modules: list[Module] = []
    for k, (import_name, folder) in enumerate(repo.packages()):
        mine = names if len(repo.packages()) == 1 else [*names[k::2], "utils"]
        for mod in mine:
            tests = repo.tests_dir(folder)
            modules.append(Module(mod, f"{import_name}.{mod}", f"{folder}/{mod}.py", f"{tests}/test_{mod}.py"))
    used: set[str] = set()
    for module in modules:
        for _ in range(n_funcs):
            name = f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
            while name in used:
                name = f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}_{rng.randint(2, 9)}"
            used.add(name)
            verb, noun = name.split("_")[:2]
            template = FILLERS[VERB_FILLER[verb]]
            module.functions[name] = template.format(name=name, arg=noun, noun=noun, q='"')
    return tuple(modules)


def module_text(repo: Repo, module: Module, functions: dict[str, str], imports: list[str]) -> str:
    """A module's source in the repository's style: docstring, imports, functions two blank lines apart."""
    head = f'"""{module.name.capitalize()} helpers of {module.import_name.split(".")[0]}."""\n'
    if imports:
        head += "\n" + "\n".join(imports) + "\n"
    body = "\n\n".join(functions.values())
    return restyle(head + "\n\n" + body, repo)


def test_text(repo: Repo, module: Module, functions: list[str], extra: str = "") -> str:
    """The module's visible test file: one test per function."""
    lines = [f"from {module.import_name} import {', '.join(functions)}", "", ""]
    for name in functions:
        lines += [f"def test_{name}():", f"    assert {name}(SAMPLE) is not None", "", ""]
    lines.insert(1, 'SAMPLE = [{"kind": "a"}, {"kind": "b"}]')
    return restyle("\n".join(lines).rstrip() + "\n" + extra, repo)


def style_config(repo: Repo) -> tuple[str, str]:
    """(path, text) of the file that states the repository's style rules."""
    length, indent, quote = STYLES[repo.style]
    if repo.style == "none":
        return "setup.cfg", "[tool:pytest]\ntestpaths = tests\n"
    if repo.style == "black":
        return "pyproject.toml", f"[tool.black]\nline-length = {length}\n\n[tool.ruff]\nline-length = {length}\n"
    quotes = "single" if quote == "'" else "double"
    return "setup.cfg", (
        f"[flake8]\nmax-line-length = {length}\nindent-size = {indent}\ninline-quotes = {quotes}\nselect = E,W,F,Q\n"
    )


def docs_text(repo_id: str, listed: list[tuple[str, list[str]]]) -> str:
    """`docs/api.md` of a large repository: one line per public function."""
    lines = [f"# {repo_id} API", ""]
    for import_name, names in listed:
        lines += [f"## {import_name}", "", *(f"- `{import_name}.{name}(...)`" for name in names), ""]
    return "\n".join(lines) + "\n"

"""The sandboxed checkout the agent works in (never editable by a harness patch): files, a clock, raw commands.

Raw commands have the quirks of a real repository and sandbox: `grep` walks files in path order, so `build/`
copies and `docs/` come before `src/`; `replace` edits the first occurrences of a text without looking further;
`run_tests` is pytest at the repository root (in a monorepo two test folders share file names, so collection
fails with "import file mismatch"), a timing-dependent test fails now and then, and a command that runs longer
than `COMMAND_TIMEOUT_S` is killed with a partial log. Every command advances the simulated clock; past
`TIME_LIMIT_S` the sandbox stops the episode (`TimeLimitExceeded`). Every command is logged as an `op` event,
attributed to the harness tool that ran it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from functools import lru_cache

from benchmarks.repofix.analysis import indent_unit, style_violations, syntax_error
from benchmarks.repofix.behaviour import Behaviour, is_source, module_name
from benchmarks.repofix.tests_log import render_log

TYPE_CHECKING = False  # no `typing` at run time: rollout children must start fast
if TYPE_CHECKING:
    from typing import Any

TIME_LIMIT_S = 1200.0  # the sandbox's wall-clock budget for one episode
COMMAND_TIMEOUT_S = 300.0  # one command is killed after this long
FLAKY_BUG_FAILS = 0.35  # how often the visible test of an unfixed flaky_test bug fails on a run


class ToolError(Exception):
    """A command refused or failed; `kind` names it for traces and symptoms."""

    kind = "tool_error"


class NotFound(ToolError):
    kind = "not_found"


class TimeLimitExceeded(Exception):
    """The sandbox's time budget is spent: the episode ends, whatever the harness does."""


class ContextWindowExceeded(Exception):
    """The model's context window is full: the model call failed (raised by `Session.next_action`)."""


class TestRun:
    """The outcome of one `run_tests`: what pytest printed and what it found."""

    __slots__ = ("collected", "duration_s", "errors", "failed", "log", "passed", "timed_out")

    def __init__(self) -> None:
        self.collected, self.passed, self.duration_s, self.timed_out = 0, 0, 0.0, False
        self.failed: dict[str, str] = {}  # test id -> message
        self.errors: dict[str, str] = {}  # test file -> collection error
        self.log = ""


class Workspace:
    """One task's checkout with the raw commands a harness tool may call."""

    def __init__(
        self, spec: Any, repo: Any, files: dict[str, str], *, rng_key: str, log: Callable[[dict[str, Any]], None]
    ) -> None:
        self.spec, self.repo, self.files, self.original = spec, repo, dict(files), dict(files)
        self.clock, self.tool, self._key, self._log = 0.0, "", rng_key, log
        self._runs = 0
        self.edits = 0  # edits of files the repository tracks (a new scratch file is not one)
        self.last_run: TestRun | None = None
        self.edits_at_last_run = 0

    def _edited(self, path: str) -> None:
        if path in self.original:
            self.edits += 1

    # plumbing -----------------------------------------------------------------------------------------------
    def charge(self, seconds: float) -> None:
        """Advance the clock; past the time limit the sandbox ends the episode."""
        self.clock += seconds
        if self.clock > TIME_LIMIT_S:
            raise TimeLimitExceeded(f"sandbox time limit of {TIME_LIMIT_S:.0f}s reached")

    def _op(self, op: str, args: dict[str, Any], seconds: float, **result: Any) -> None:
        event = {"type": "op", "op": op, "args": args, "tool": self.tool, "seconds": seconds,
                 "clock": round(self.clock + seconds, 1)}  # fmt: skip
        self._log({**event, **result})
        self.charge(seconds)

    def _need(self, path: str) -> str:
        if path not in self.files:
            raise NotFound(f"{path}: no such file")
        return self.files[path]

    def behaviour(self) -> Behaviour:
        return Behaviour(self.spec, self.files, self.original)

    # reading --------------------------------------------------------------------------------------------------
    def list_files(self, folder: str = "") -> list[str]:
        found = sorted(p for p in self.files if p.startswith(folder.rstrip("/") + "/" if folder else ""))
        self._op("list_files", {"folder": folder}, 0.5, total=len(found))
        return found

    def grep(self, pattern: str, folder: str = "") -> list[tuple[str, int, str]]:
        """Every line containing `pattern` (plain text), in path order then line order."""
        prefix = folder.rstrip("/") + "/" if folder else ""
        hits = []
        for path in sorted(self.files):
            if path.startswith(prefix) and pattern in self.files[path]:
                for number, line in enumerate(self.files[path].split("\n"), 1):
                    if pattern in line:
                        hits.append((path, number, line))
        self._op(
            "grep", {"pattern": pattern, "folder": folder}, 1.0, total=len(hits), files=sorted({h[0] for h in hits})
        )
        return hits

    def read(self, path: str) -> str:
        text = self._need(path)
        self._op("read", {"path": path}, 0.5, chars=len(text))
        return text

    def lines(self, path: str, start: int, end: int) -> list[tuple[int, str]]:
        rows = self._need(path).split("\n")
        start, end = max(1, int(start)), min(len(rows), int(end))
        self._op("lines", {"path": path, "start": start, "end": end}, 0.5)
        return [(n, rows[n - 1]) for n in range(start, end + 1)]

    def style_rules(self) -> dict[str, Any]:
        """The repository's style settings, read from pyproject.toml / setup.cfg."""
        text = self.files.get("pyproject.toml", "") + "\n" + self.files.get("setup.cfg", "")
        found = re.search(r"(?:line-length|max-line-length) = (\d+)", text)
        indent = re.search(r"indent-size = (\d+)", text)
        quotes = re.search(r"inline-quotes = (\w+)", text)
        rules = {
            "max_line": int(found.group(1)) if found else 0,
            "indent": int(indent.group(1)) if indent else 4,
            "quote": "'" if quotes and quotes.group(1) == "single" else '"',
        }
        self._op("style_rules", {}, 0.2, rules=rules)
        return rules

    def changed_files(self) -> list[str]:
        """`git status`: the files that differ from the checkout (new ones included)."""
        found = sorted(p for p in self.files if self.files[p] != self.original.get(p))
        self._op("changed_files", {}, 0.2, files=found)
        return found

    def diff(self) -> str:
        """The changed files and their changed lines (`git diff`, roughly)."""
        out = []
        for path in sorted(p for p in self.files if self.files[p] != self.original.get(p)):
            before = set(self.original.get(path, "").split("\n"))
            out.append(f"--- a/{path}\n+++ b/{path}")
            out += [f"+{line}" for line in self.files[path].split("\n") if line not in before]
        self._op("diff", {}, 0.5, files=len(out))
        return "\n".join(out)

    # writing --------------------------------------------------------------------------------------------------
    def replace(self, path: str, old: str, new: str, count: int = 1) -> dict[str, Any]:
        """Replace the first `count` occurrences of `old` (every one when count is 0). Reports how many there
        were and on which lines; `NotFound` when there is none."""
        text = self._need(path)
        starts = [m.start() for m in re.finditer(re.escape(old), text)] if old else []
        lines = [text.count("\n", 0, s) + 1 for s in starts]
        if not starts:
            self._op("replace", {"path": path}, 0.5, occurrences=0)
            raise NotFound(f"{path}: the text to replace was not found")
        self.files[path] = text.replace(old, new, count if count > 0 else -1)
        self._edited(path)
        self._op("replace", {"path": path}, 0.5, occurrences=len(starts), lines=lines, replaced=count or len(starts))
        return {"occurrences": len(starts), "lines": lines}

    def write(self, path: str, text: str) -> None:
        self.files[path] = text
        self._edited(path)
        self._op("write", {"path": path}, 0.5, chars=len(text))

    def restore(self, path: str) -> None:
        """`git checkout -- path`: the file as it was before the episode."""
        if path in self.original:
            self.files[path] = self.original[path]
        else:
            self.files.pop(path, None)
        self._edited(path)
        self._op("restore", {"path": path}, 0.5)

    def format_file(self, path: str, line_length: int, indent: int, quote: str) -> int:
        """A formatter pass, as black does it: trailing blanks stripped, indentation re-based on `indent`, string
        quotes made `quote`. Comments are left alone, however long. A file that does not compile is left as it
        is. Returns how many lines changed."""
        text = self._need(path)
        if syntax_error(text, path):
            self._op("format", {"path": path}, 1.0, changed=0, error="cannot parse")
            return 0
        unit, out = indent_unit(text) or 4, []
        for line in text.split("\n"):
            body = line.rstrip().lstrip(" ")
            width = len(line) - len(line.lstrip(" "))
            code, sep, comment = body.partition("  #")
            code = code.replace('"""', "\0")
            code = code.replace("'", '"') if quote == '"' else code.replace('"', "'")
            body = code.replace("\0", '"""') + sep + comment
            out.append(" " * ((width // unit) * indent + width % unit) + body if body else "")
        new = "\n".join(out)
        changed = sum(a != b for a, b in zip(text.split("\n"), new.split("\n"), strict=False))
        if changed:
            self.files[path] = new
            self._edited(path)
        self._op("format", {"path": path, "line_length": line_length, "indent": indent}, 1.0, changed=changed)
        return changed

    def lint(self, path: str) -> list[str]:
        """flake8 with the repository's settings on one file (syntax errors included)."""
        text = self._need(path)
        rules = {"max_line": self.repo.max_line, "indent": self.repo.indent, "quote": self.repo.quote}
        found = style_violations(path, text, self.original.get(path, ""), rules, only_changed=False)
        self._op("lint", {"path": path}, 1.0, findings=len(found))
        return found

    # running --------------------------------------------------------------------------------------------------
    def run_tests(self, paths: list[str] | None = None, cwd: str = "") -> TestRun:
        """pytest in `cwd` (the repository root by default), on `paths` (test files or `file::test` ids) or on
        every test under `cwd`."""
        self._runs += 1
        rng = random.Random(f"{self._key}|tests|{self._runs}")
        selected = _select_tests(self.files, paths, cwd)
        run = TestRun()
        behaviour = self.behaviour()
        all_tests = [p for p in self.files if _is_test_file(p)]
        share = len({p.split("::")[0] for p in selected}) / max(1, len(all_tests))
        run.duration_s = round(self.repo.suite_s if not paths and not cwd else 2.0 + self.repo.suite_s * share, 1)
        results = self._outcomes(selected, behaviour, rng, root_run=not paths and not cwd)
        for test_id, (outcome, message) in results.items():
            if outcome == "error":
                run.errors[test_id] = message
            elif outcome == "failed":
                run.failed[test_id] = message
            else:
                run.passed += 1
        run.collected = run.passed + len(run.failed)
        run.timed_out = run.duration_s > COMMAND_TIMEOUT_S
        run.log = render_log(results, run, COMMAND_TIMEOUT_S)
        self.last_run, self.edits_at_last_run = run, self.edits
        self._op(
            "run_tests",
            {"paths": paths or [], "cwd": cwd},
            min(run.duration_s, COMMAND_TIMEOUT_S),
            collected=run.collected,
            failed=sorted(run.failed),
            errors=sorted(run.errors),
            causes={t: m.split(":")[0] for t, m in {**run.failed, **run.errors}.items()},
            timed_out=run.timed_out,
        )
        return run

    def _outcomes(
        self, selected: list[str], behaviour: Behaviour, rng: random.Random, root_run: bool
    ) -> dict[str, tuple[str, str]]:
        """test id (or test file, for a collection error) -> (passed | failed | error, message)."""
        spec, repo = self.spec, self.repo
        out: dict[str, tuple[str, str]] = {}
        basenames: dict[str, str] = {}
        flaky_bug = spec.params.get("flaky_test", "")
        sources = first_source_by_module(self.files)
        by_file: dict[str, list[str]] = {}  # test file -> its selected ids, in selection order
        for test_id in selected:
            by_file.setdefault(test_id.split("::")[0], []).append(test_id)
        for test_file in sorted(by_file):
            base = test_file.rsplit("/", 1)[-1]
            if root_run and repo.layout == "monorepo" and base in basenames:
                out[test_file] = ("error", f"import file mismatch: imported module '{base[:-3]}' has this "
                                  f"__file__ attribute: {basenames[base]} which is not the same as the test file "
                                  f"we want to collect: {test_file}")  # fmt: skip
                continue
            basenames[base] = test_file
            module = module_of_test(test_file, self.files, sources)
            error = behaviour.load_error(module) if module else ""
            if error:
                out[test_file] = ("error", error)
                continue
            broken = set(behaviour.broken(module)) if module else set()
            for test_id in by_file[test_file]:
                name = test_id.split("::")[1]
                if name == "test_flake8":
                    found = [v for p in behaviour.changed_sources() for v in self._style(p)]
                    out[test_id] = ("failed", "AssertionError: flake8 found " + "; ".join(found[:3])) if found else (
                        "passed", "")  # fmt: skip
                elif name.endswith("_timing"):
                    out[test_id] = ("failed", "AssertionError: took 0.08s") if rng.random() < repo.flaky / 2 else (
                        "passed", "")  # fmt: skip
                elif test_id == flaky_bug and behaviour.site_state(0) != "fixed" and not _test_edited(self, test_id):
                    fails = rng.random() < FLAKY_BUG_FAILS
                    out[test_id] = ("failed", "AssertionError: assert 'b, a' == 'a, b'") if fails else ("passed", "")
                elif name.removeprefix("test_") in broken:
                    func = name.removeprefix("test_")
                    out[test_id] = ("failed", f"AssertionError: {func}(SAMPLE) returned something else than before")
                else:
                    out[test_id] = ("passed", "")
        return out

    def _style(self, path: str) -> list[str]:
        rules = {"max_line": self.repo.max_line, "indent": self.repo.indent, "quote": self.repo.quote}
        return style_violations(path, self.files[path], self.original.get(path, ""), rules)

    def run_script(self, path: str) -> str:
        """`python path`: a reproduction script; see `scripts.run_repro` for what it can check."""
        from benchmarks.repofix.scripts import run_repro

        text = self._need(path)
        output, code = run_repro(text, self.behaviour(), self.spec, random.Random(f"{self._key}|script|{self.clock}"))
        self._op("run_script", {"path": path}, 2.0, exit_code=code)
        return output


def _is_test_file(path: str) -> bool:
    return path.endswith(".py") and path.rsplit("/", 1)[-1].startswith("test_")


def _select_tests(files: dict[str, str], paths: list[str] | None, cwd: str) -> list[str]:
    """Test ids (`file::test_name`) that a pytest call collects."""
    prefix = cwd.rstrip("/") + "/" if cwd else ""
    wanted = [p if not prefix or p.startswith(prefix) else prefix + p for p in paths] if paths else [prefix]
    out = []
    for path in sorted(p for p in files if _is_test_file(p)):
        for name in _test_names(files[path]):
            test_id = f"{path}::{name}"
            if any(test_id == w or path == w or ((w.endswith("/") or not w) and path.startswith(w)) for w in wanted):
                out.append(test_id)
    return out


@lru_cache(maxsize=4096)
def _test_names(text: str) -> tuple[str, ...]:
    """The test functions a test file defines, in file order."""
    return tuple(re.findall(r"^def (test_\w+)\(", text, re.M))


def module_of_test(test_file: str, files: dict[str, str], sources: dict[str, str] | None = None) -> str:
    """The source module a test file imports its functions from ('' for none). `sources` is
    `first_source_by_module(files)` when the caller has it already."""
    first = re.search(r"^from ([\w.]+) import", files.get(test_file, ""), re.M)
    if not first:
        return ""
    if sources is None:
        return next((p for p in files if is_source(p) and module_name(p) == first.group(1)), "")
    return sources.get(first.group(1), "")


def first_source_by_module(files: dict[str, str]) -> dict[str, str]:
    """Import name -> the first source file (in `files` order) of that name: what `module_of_test` finds."""
    out: dict[str, str] = {}
    for path in files:
        if is_source(path):
            out.setdefault(module_name(path), path)
    return out


def _test_edited(ws: Workspace, test_id: str) -> bool:
    path = test_id.split("::")[0]
    return ws.files.get(path) != ws.original.get(path)

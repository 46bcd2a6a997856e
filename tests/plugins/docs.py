"""Fixtures for the documentation tests: the repository's markdown docs parsed into code blocks, inline code
spans and table rows."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HISTORY = ("CHANGELOG.md", "docs/changelog.md")
"""The changelog (and the site page that includes it) names history on purpose: what it says was removed is not
drift, so the docs checks skip it."""
SITE_PAGES = tuple(sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md") if f"docs/{p.name}" not in HISTORY))
"""The documentation site's pages (mkdocs.yml builds them); `docs/cli.md` is generated from the CLIs' help."""
MAIN_DOCS = ("README.md", "DEVELOPERS.md", *SITE_PAGES)
FOR_DEVELOPERS = ("DEVELOPERS.md", "docs/developers.md", "docs/architecture.md", "docs/cli.md")
CONFIG_PAGE = "docs/configuration.md"
"""The configuration reference: every config field is documented there (tests/docs/test_docs_config.py)."""
TOOLS = ("saddler", "evo-dag")
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_SEPARATORS = {"&&", "||", ";", "|"}
_SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.M)


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language tag ("" when none), its text and the line it starts on."""

    lang: str
    text: str
    line: int


@dataclass
class Doc:
    """One markdown file: fenced blocks, and the prose (everything outside them) with its inline code spans."""

    name: str
    text: str
    blocks: list[Block] = field(default_factory=list)
    prose: str = ""

    @classmethod
    def read(cls, name: str) -> Doc:
        text = (REPO / name).read_text(encoding="utf-8")
        # a page that includes a file (pymdownx.snippets, as mkdocs builds it) is checked with the file's text
        text = _SNIPPET.sub(lambda m: (REPO / m.group(1)).read_text(encoding="utf-8"), text)
        blocks = [Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in _FENCE.finditer(text)]
        return cls(name, text, blocks, _FENCE.sub("", text))

    def spans(self) -> list[str]:
        """Every inline code span outside the fenced blocks, in order (table cells included)."""
        return _SPAN.findall(self.prose)

    def toml_blocks(self) -> list[Block]:
        return [b for b in self.blocks if b.lang == "toml"]

    def table_rows(self, header: str) -> list[str]:
        """The rows of the markdown table whose header row starts with `| header |`."""
        rows: list[str] = []
        inside = False
        for line in self.prose.splitlines():
            if line.startswith(f"| {header} |"):
                inside = True
            elif inside and line.startswith("|"):
                if not set(line) <= set("|-: "):
                    rows.append(line)
            elif inside:
                break
        return rows

    def command_table(self) -> list[str]:
        """README's Commands table, one command string per row's first cell: a span that does not start with a
        tool continues the previous span's command (`saddler skill run SKILL_DIR` / `skill report W` becomes
        `saddler skill run SKILL_DIR / skill report W`)."""
        out: list[str] = []
        for row in self.table_rows("command"):
            current = ""
            for span in _SPAN.findall(row.split(" | ")[0]):
                if span.split(" ", 1)[0] in TOOLS:
                    if current:
                        out.append(current)
                    current = span
                else:
                    current += f" / {span}"
            out.append(current)
        return out

    def command_lines(self) -> list[tuple[str, str]]:
        """(where, command) for every `saddler …` / `evo-dag …` command in a shell or plain code block, and every
        inline span that starts with one of the tools. Continuation lines are joined, comments dropped, and
        `a && b` gives two commands."""
        found: list[tuple[str, str]] = []
        for block in self.blocks:
            if block.lang not in ("", "bash", "sh", "console"):
                continue
            for offset, line in _logical_lines(block.text):
                if not re.search(rf"(^|&&|;|\|)\s*({'|'.join(TOOLS)})\s", line):
                    continue
                for command in _split_commands(line):
                    found.append((f"{self.name}:{block.line + offset}", command))
        for span in self.spans():
            span = span.replace("{evo_dag}", "evo-dag")  # the session prompts' placeholder for the evo-dag command
            if span.split(" ", 1)[0] in TOOLS:
                found.append((f"{self.name}: `{span}`", span))
        return found


def _logical_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def _split_commands(line: str) -> list[str]:
    tokens = shlex.split(line, comments=True)
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    return [shlex.join(c) for c in commands if c and c[0] in TOOLS]


def tokens_of(command: str) -> list[str]:
    """Split a documented command into words: `\\|` is a table's escaped `|`, `[` `]` mark optional parts."""
    text = command.replace("\\|", "|")
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    return [w.strip("[]") for w in words if w.strip("[]")]


def tracked_markdown() -> list[str]:
    """Every markdown file git tracks outside tests/: docs, package READMEs, templates, session prompts."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.md", ":!tests/"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return sorted(name for name in out.split("\0") if name)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's root folder."""
    return REPO


@pytest.fixture(scope="session")
def docs() -> dict[str, Doc]:
    """README.md, DEVELOPERS.md and every page of the documentation site, parsed."""
    return {name: Doc.read(name) for name in MAIN_DOCS}


@pytest.fixture(scope="session")
def all_docs() -> dict[str, Doc]:
    """Every tracked markdown file outside tests/, parsed."""
    names = tracked_markdown()
    assert set(MAIN_DOCS) <= set(names)
    return {name: Doc.read(name) for name in names if name not in HISTORY}


@pytest.fixture(scope="session")
def readme(docs: dict[str, Doc]) -> Doc:
    return docs["README.md"]


@pytest.fixture(scope="session")
def config_page(docs: dict[str, Doc]) -> Doc:
    """The configuration reference page."""
    return docs[CONFIG_PAGE]


@pytest.fixture(scope="session")
def reference(docs: dict[str, Doc]) -> Doc:
    """README and the site's pages for users as one document (the config checks read every key any of them names;
    the pages for developers name modules, not keys, and the CLI reference is the CLIs' own text)."""
    parts = [d for d in docs.values() if d.name not in FOR_DEVELOPERS]
    return Doc(
        "README.md + docs/",
        "\n".join(d.text for d in parts),
        [b for d in parts for b in d.blocks],
        "\n".join(d.prose for d in parts),
    )

"""What an optimizer session may read: held-out data stays sealed inside the run folder.

Inside the run folder a session reads only what `RunPaths.session_readable` lists (the train traces, the
transcripts with the session view of the EvoDAG, the harness and its worktrees, the config); the full EvoDAG, the
dev and test traces, the report and the export are refused to the read tools (Read, Glob, Grep) and to `git
diff`'s paths (`saddler.sessions.guard`), and do not exist inside bubblewrap (`saddler.sessions.confine`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

READ_TOOLS = {"Read": "file_path", "NotebookRead": "notebook_path"}
SEARCH_TOOLS = {"Glob": "path", "Grep": "path", "LS": "path"}
"""Claude Code's read and search tools, with the input naming the file or folder they open."""


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class ReadPolicy:
    """What a session may read: anything outside the run folder `run_dir`, and inside it only the `readable`
    paths and what lies below them (an empty `readable` hides the whole run folder). No `run_dir`: no limit
    (a session outside any run). Paths are compared resolved, so a symlink cannot lead around the rule."""

    run_dir: str = ""
    readable: tuple[str, ...] = ()

    def refusal(self, path: str, cwd: str, *, search: bool = False) -> str | None:
        """Why reading `path` (relative to `cwd`) must be refused, or None. A `search` (Glob, Grep) is also refused
        from the run folder itself or any folder above it: it would search the held-out files too."""
        if not self.run_dir:
            return None
        root = os.path.realpath(self.run_dir)
        target = os.path.realpath(os.path.join(cwd or root, os.path.expanduser(path or ".")))
        if search and _inside(root, target):
            return f"searching {target} would search the run folder's held-out files; {self.where()}"
        if not _inside(target, root) or any(_inside(target, os.path.realpath(p)) for p in self.readable):
            return None
        return f"{target} is held out from optimizer sessions (test, dev per task, the full EvoDAG); {self.where()}"

    def where(self) -> str:
        """Where a session may read and search inside the run folder, for refusals and prompts."""
        shown = ", ".join(f"`{p}`" for p in self.readable) or "nothing"
        return f"inside the run folder read or search only {shown}"

    def tool_refusal(self, tool: str, tool_input: dict[str, Any], cwd: str) -> str | None:
        """Why a read or search tool call (`READ_TOOLS`, `SEARCH_TOOLS`) must be refused, or None. A Glob pattern
        must be relative (the folder it searches is its `path`, checked as a search)."""
        if tool in READ_TOOLS:
            return self.refusal(str(tool_input.get(READ_TOOLS[tool]) or ""), cwd)
        pattern = str(tool_input.get("pattern", "")) if tool == "Glob" else ""
        if pattern.startswith(("/", "~")) or ".." in Path(pattern).parts:
            return "give Glob a relative pattern and the folder to search as `path`"
        return self.refusal(str(tool_input.get(SEARCH_TOOLS.get(tool, "path")) or ""), cwd, search=True)

"""Edit tool: change a file by replacing a text."""

from benchmarks.repofix.sdk import tool


@tool("edit_file", "Edit a file: replace the old text with the new text.")
def edit_file(ws, path, old, new):
    before = ws.read(path)
    _check_target(ws, path, before, old)
    ws.replace(path, old, new)
    _check_result(ws, path, before)
    return f"Edited {path}."


def _check_target(ws, path, text, old):
    """Before an edit: nothing is checked."""


def _check_result(ws, path, before):
    """After an edit: nothing is checked."""

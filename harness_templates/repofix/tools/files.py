"""File tool: open a file."""

from benchmarks.repofix.sdk import tool


@tool("open_file", "Open a file and show its whole content.")
def open_file(ws, path):
    return ws.read(path)

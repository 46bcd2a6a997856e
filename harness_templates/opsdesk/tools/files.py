"""Files tool: read a text file."""

from benchmarks.opsdesk.sdk import tool


@tool("files_read", "Read a text file by path.")
def files_read(env, path):
    return env.files.read(path)

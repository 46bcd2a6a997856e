"""Utility tools."""

from benchmarks.opsdesk.sdk import tool


@tool("wait", "Wait a number of seconds before trying again (for example after a rate limit).")
def wait(env, seconds):
    env.sleep(seconds)
    return {"waited": seconds}

"""Profile tool: who the user is (name, company, city, time zone offset, policy)."""

from benchmarks.opsdesk.sdk import tool


@tool("profile_get", "Get the user's profile: name, company, city, time zone (UTC offset) and policy.")
def profile_get(env):
    return env.get_profile()

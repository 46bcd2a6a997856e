"""Contacts tool: look a person up by name."""

from benchmarks.opsdesk.sdk import tool


@tool("contacts_search", "Find a contact's email address by name.")
def contacts_search(env, name):
    found = env.contacts.search(name)
    if not found["matches"]:
        return {"error": f"no contact named {name}"}
    best = found["matches"][0]
    return {"name": best["name"], "email": best["email"]}

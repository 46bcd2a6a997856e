"""Mail tools: search the inbox, send a message."""

from benchmarks.opsdesk.sdk import tool


@tool("mail_search", "Search the inbox for emails from a sender (name or address).")
def mail_search(env, sender):
    page = env.mail.search(sender)
    return page["messages"]


@tool("mail_send", "Send an email to one recipient address.")
def mail_send(env, to, subject, body):
    return env.mail.send(to, subject, body)

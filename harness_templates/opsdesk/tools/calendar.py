"""Calendar tools: list events, create an event, move an event."""

from benchmarks.opsdesk.sdk import tool


@tool("calendar_list_events", "List calendar events between two dates (YYYY-MM-DD, inclusive).")
def calendar_list_events(env, start_date, end_date):
    page = env.calendar.list_events(_range_start(env, start_date), _range_end(env, end_date))
    return [_show(env, event) for event in page["events"]]


@tool("calendar_create_event", "Create a calendar event at a start time and invite attendees by email.")
def calendar_create_event(env, title, start, minutes, attendees):
    created = env.calendar.create_event(title, _parse_start(env, start), minutes, attendees)
    return _show(env, created)


@tool("calendar_update_event", "Move an existing calendar event to a new start time.")
def calendar_update_event(env, event_id, start):
    return _show(env, env.calendar.update_event(event_id, _parse_start(env, start)))


def _show(env, event):
    shown = dict(event)
    shown["start"] = _display(env, event["start"])
    return shown


# Time handling -------------------------------------------------------------------------------


def _range_start(env, date):
    return date


def _range_end(env, date):
    return date


def _parse_start(env, text):
    return text


def _display(env, iso):
    return iso

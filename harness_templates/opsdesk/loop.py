"""The agent loop: ask the model for one step per turn, run the tool it picks, feed the result back."""

MAX_TURNS = 12


def run(session):
    """Drive the model until it finishes or the turn budget is spent."""
    for _turn in range(MAX_TURNS):
        action = session.next_action()
        if action.kind == "finish":
            reminders = [text for text in (hook(session.state) for hook in session.before_finish_hooks) if text]
            if reminders:
                for text in reminders:
                    session.remind(text)
                continue
            session.finish(action.answer)
            return
        call_tool(session, action.tool, action.args)
    session.stop("max_turns")


def call_tool(session, name, args, observe=True):
    """Run one tool through the middleware; report the result (or the error) to the model."""
    try:
        result = session.invoke(name, args)
    except session.errors.ApiError as exc:
        if observe:
            session.observe_error(exc)
        return None
    for middleware in session.middleware:
        result = middleware(name, args, result)
    if observe:
        session.observe(result)
    for hook in session.after_tool_hooks:
        for forced_name, forced_args in hook(session.state, name, args, result) or []:
            call_tool(session, forced_name, forced_args, observe=False)
    return result

"""The agent loop: one model step per turn; run the tool it picks and show the result; stop when it submits."""

MAX_TURNS = 20


def run(session):
    """Drive the model until it submits or the turn budget is spent."""
    for _turn in range(MAX_TURNS):
        prepare_turn(session)
        try:
            action = session.next_action()
        except session.errors.ContextWindowExceeded:
            session.stop("context_overflow")
            return
        if action.kind == "submit":
            if not ready_to_submit(session):
                continue
            session.submit(action.summary)
            return
        call_tool(session, action.tool, action.args)
    session.stop("max_turns")


def prepare_turn(session):
    """Before each model call: nothing to do."""


def ready_to_submit(session):
    """Let the submit hooks remind the model once; True when the submission may go through."""
    reminders = [text for text in (hook(session.state) for hook in session.before_submit_hooks) if text]
    if reminders and not session.state.get("reminded"):
        session.state["reminded"] = True
        for text in reminders:
            session.remind(text)
        return False
    return True


def call_tool(session, name, args):
    """Run one tool through the middleware; show the result (or the error) to the model."""
    try:
        result = session.invoke(name, args)
    except session.errors.ToolError as exc:
        session.observe_error(exc)
        return None
    for middleware in session.middleware:
        result = middleware(session.workspace, name, args, result)
    session.observe(result)
    after_result(session, name, args, result)
    for hook in session.after_tool_hooks:
        for forced_name, forced_args in hook(session.state, name, args, result) or []:
            call_tool(session, forced_name, forced_args)
    return result


def after_result(session, name, args, result):
    """After a result was shown: nothing to do."""

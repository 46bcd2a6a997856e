"""Finish hook: a chance to remind the agent of something before it finishes."""


def before_finish(state):
    return None

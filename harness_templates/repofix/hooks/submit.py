"""Submit hook: a chance to remind the model of something before it submits."""


def before_submit(state):
    return None

"""Output middleware: keep tool results short enough for the model's context."""

LIMIT = 4000


def after_tool(ws, name, args, result):
    if isinstance(result, str) and len(result) > LIMIT:
        return result[:LIMIT] + f"\n...[truncated {len(result) - LIMIT} chars]"
    return result

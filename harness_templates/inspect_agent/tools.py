"""Tools the agent may call. Each is an Inspect `@tool`: the docstring is what the model reads."""

import ast
import operator

from inspect_ai.tool import Tool, ToolError, tool

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg, ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv}  # fmt: skip
UNITS = {"dozen": 12, "score": 20, "gross": 144, "week_days": 7, "hour_minutes": 60, "day_hours": 24}


def _evaluate(node):
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ToolError("only numbers and + - * / // % ** and parentheses are allowed")


@tool
def calculator() -> Tool:
    async def execute(expression: str) -> str:
        """Evaluate an arithmetic expression exactly.

        Args:
            expression: Numbers with + - * / // % ** and parentheses, e.g. "(3 + 4) * 12".

        Returns:
            The value of the expression.
        """
        try:
            value = _evaluate(ast.parse(expression, mode="eval"))
        except (SyntaxError, ZeroDivisionError) as exc:
            raise ToolError(f"cannot evaluate {expression!r}: {exc}") from exc
        return str(int(value)) if float(value).is_integer() else str(value)

    return execute


@tool
def lookup_unit() -> Tool:
    async def execute(unit: str) -> str:
        """How many items or smaller units one unit holds.

        Args:
            unit: One of dozen, score, gross, week_days, hour_minutes, day_hours.

        Returns:
            The count, as a number.
        """
        if unit not in UNITS:
            raise ToolError(f"unknown unit {unit!r}; known: {', '.join(UNITS)}")
        return str(UNITS[unit])

    return execute

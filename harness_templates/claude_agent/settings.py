"""Loop settings of the task agent (capability: the optimizer may tune them)."""

MODEL = "claude-haiku-4-5"
FALLBACK_MODEL = None
MAX_TURNS = 8
# Claude Code's built-in tools the agent may use; the workspace tools come from tools/workspace.py.
BUILTIN_TOOLS: list[str] = []

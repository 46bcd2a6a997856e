"""The agent under optimization: a ReAct loop (Inspect's `react`) with the tools of tools.py and the system
prompt of prompts/system.md. saddler builds it with `agent()` for every rollout (benchmark option
`solver = "agent.py@agent"`)."""

from pathlib import Path

from inspect_ai.agent import Agent, AgentAttempts, AgentPrompt, react
from inspect_ai.agent import agent as inspect_agent
from tools import calculator, lookup_unit

HERE = Path(__file__).parent
SYSTEM_PROMPT = (HERE / "prompts" / "system.md").read_text(encoding="utf-8")


@inspect_agent
def agent() -> Agent:
    """Reason, call tools, submit one answer (one attempt)."""
    return react(
        name="harness_agent",
        description="Solves the task with tools and submits a final answer.",
        prompt=AgentPrompt(instructions=SYSTEM_PROMPT),
        tools=[calculator(), lookup_unit()],
        attempts=AgentAttempts(attempts=1),
    )

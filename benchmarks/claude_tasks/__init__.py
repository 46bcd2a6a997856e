"""claude-tasks: questions about small ledgers, answered by a real claude-agent-sdk agent.

The example benchmark for the `claude_agent` harness template. Each task gives the agent a fresh
workspace (a `ledger.csv` of expenses and a `policy.md`) and a question; the agent must submit the
answer with its `submit_answer` tool. Groups are companies: train `acme`, `globex`; dev `initech`;
test `umbrella`, `hooli`. Data are generated from the group name (deterministic); the rollout seed
only shuffles the ledger's row order. Running a task spends real tokens: without ANTHROPIC_API_KEY
(or a transport given for tests) a rollout is an `infra_error`, never an exception.
"""

from __future__ import annotations

from benchmarks.claude_tasks.bench import ClaudeTasksBenchmark

__all__ = ["ClaudeTasksBenchmark"]

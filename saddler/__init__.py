"""saddler: optimize an LLM agent's harness against a graded benchmark (the AutoSaddler method).

Keep this module import-light: rollout child processes import `saddler.benchmark` and must start fast.
"""

__version__ = "0.1.0"

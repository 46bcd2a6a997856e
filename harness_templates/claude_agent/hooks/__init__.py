"""Hooks: middleware around the agent's tool calls."""

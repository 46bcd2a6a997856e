"""The agent's custom tools (in-process MCP server)."""

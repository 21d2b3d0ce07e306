"""Adapters the kit ships: each module is imported only when named on the command line.

- `exitkit.adapters.plain:PlainLoop` — a plain `openai` SDK loop, the worked example (needs `openai`);
- `exitkit.adapters.ours:Ours` — this repository's harness;
- one module per framework (`agents_sdk`, `pydantic_ai`, `langgraph`, `autogen`, `agno`,
  `strands`, `smolagents`, `crewai`, `llamaindex`, `adk`, `semantic_kernel`), each pinned in
  pyproject's `peers-<name>` extra; `make peers` runs each in a virtualenv of its own;
- `plain_mcp`, `agents_sdk_mcp`, `pydantic_ai_mcp`, `langgraph_mcp` — the same with the kit's tools
  over MCP (`job.mcp_url`), each through its own MCP client.
"""

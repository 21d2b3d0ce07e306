"""Adapters the kit ships: each module is imported only when named on the command line.

- `exitkit.adapters.plain:PlainLoop` — a plain `openai` SDK loop, the worked example (needs `openai`);
- `exitkit.adapters.ours:Ours` — this repository's harness;
- `exitkit.adapters.agents_sdk:AgentsSDK`, `exitkit.adapters.pydantic_ai:PydanticAI`,
  `exitkit.adapters.langgraph:LangGraph` — the frameworks, behind the `peers` extra
  (`pip install -e '.[peers]'`).
"""

"""`make peers`: the exits test kit (`exitkit`) run over the frameworks people use, and over ours.

Nothing here measures. Each framework gets a virtualenv of its own (`venvs.py`: their pins
clash, e.g. Strands wants `openai<3`), the kit runs its adapters there (`one.py`, which hands
`exitkit.adapters.*` to `exitkit.card.check`), and `__main__` merges every framework's card
into `results/peers.md` / `.json` / `.png`. The TypeScript/JavaScript agents (`node-agents/`, one
`npm ci` from its lock: `node.py`) run as command adapters in the lab's own virtualenv. The main
adapters run every case; the documented-setting variants (a framework's own fix for tool errors,
pydantic-ai's token limit, LangGraph's recursion limit one step either side, our deliberately
vague error wording) run only the case they are about. The plain loop and the three frameworks with
an MCP client that runs beside the kit's MCP server run every case twice: tools wrapped, and tools
over MCP.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NAME = "peers"
TITLE = "The five exits across the frameworks people use, measured at the mock"


@dataclass(frozen=True, kw_only=True)
class Framework:
    name: str
    """The card's name for it, and its virtualenv's folder (`.venv-peers/<name>`)."""
    extra: str | None
    """The pyproject extra holding its pins; None: the lab's own virtualenv (ours, the plain loop)."""
    packages: tuple[str, ...]
    """The distributions whose versions the card shows."""
    adapters: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Adapter spec -> the cases it runs (empty: every case), in the order of the card's rows."""
    commands: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Command line of an agent in another language (`--command`, run from the repository's root)
    -> the cases it runs; its rows follow the adapters'."""
    npm: str | None = None
    """A folder of this repository holding a package.json and its lock, installed with `npm ci`
    (`node.py`) before the card runs: its agents are `commands`, run under the lab's own
    interpreter, and `packages` are npm packages."""

    @property
    def agents(self) -> dict[str, tuple[str, ...]]:
        """Every row's spec (an adapter spec or a command line) -> its cases, in the card's order."""
        return {**self.adapters, **self.commands}


A = "exitkit.adapters."
NODE_AGENTS = "node-agents"
"""The TypeScript/JavaScript agents' folder (its own package.json and lock)."""
FRAMEWORKS = (
    Framework(name="ours", extra=None, packages=("openai",), adapters={
        f"{A}ours:Ours": (), f"{A}plain:PlainLoop": (), f"{A}plain_mcp:PlainLoopOverMCP": (),
        f"{A}ours:OursGeneric": ("tool_error",)}),
    Framework(name="openai-agents", extra="peers-agents-sdk", packages=("openai-agents", "openai"), adapters={
        f"{A}agents_sdk:AgentsSDK": (), f"{A}agents_sdk_mcp:AgentsSDKOverMCP": (),
        f"{A}agents_sdk:AgentsSDKExplained": ("tool_error",)}),
    Framework(name="pydantic-ai", extra="peers-pydantic-ai", packages=("pydantic-ai-slim", "openai"),
              adapters={
        f"{A}pydantic_ai:PydanticAI": (), f"{A}pydantic_ai_mcp:PydanticAIOverMCP": (),
        f"{A}pydantic_ai:PydanticAITokenBudget": ("budget",),
        f"{A}pydantic_ai:PydanticAIModelRetry": ("tool_error",)}),
    Framework(name="langgraph", extra="peers-langgraph", packages=("langgraph", "langchain-openai"),
              adapters={
        f"{A}langgraph:LangGraph": (), f"{A}langgraph_mcp:LangGraphOverMCP": (),
        f"{A}langgraph:LangGraphStepLess": ("turn_cap",),
        f"{A}langgraph:LangGraphStepMore": ("turn_cap",), f"{A}langgraph:LangGraphHandled": ("tool_error",)}),
    Framework(name="autogen", extra="peers-autogen", packages=("autogen-agentchat", "autogen-ext", "openai"),
              adapters={f"{A}autogen:AutoGen": ()}),
    Framework(name="agno", extra="peers-agno", packages=("agno", "openai"), adapters={f"{A}agno:Agno": ()}),
    Framework(name="adk", extra="peers-adk", packages=("google-adk", "litellm", "openai"),
              adapters={f"{A}adk:ADK": ()}),
    Framework(name="strands", extra="peers-strands", packages=("strands-agents", "openai"),
              adapters={f"{A}strands:Strands": ()}),
    Framework(name="llamaindex", extra="peers-llamaindex",
              packages=("llama-index-core", "llama-index-llms-openai-like", "openai"),
              adapters={f"{A}llamaindex:LlamaIndex": ()}),
    Framework(name="smolagents", extra="peers-smolagents", packages=("smolagents", "openai"),
              adapters={f"{A}smolagents:Smolagents": ()}),
    Framework(name="crewai", extra="peers-crewai", packages=("crewai", "openai"),
              adapters={f"{A}crewai:CrewAI": ()}),
    Framework(name="semantic-kernel", extra="peers-semantic-kernel", packages=("semantic-kernel", "openai"),
              adapters={f"{A}semantic_kernel:SemanticKernel": ()}),
    Framework(name="node-openai", extra=None, npm=NODE_AGENTS,
              packages=("openai", "@modelcontextprotocol/sdk"),
              commands={f"node {NODE_AGENTS}/openai-loop.mjs": ()}),
    Framework(name="vercel-ai", extra=None, npm=NODE_AGENTS, packages=("ai", "@ai-sdk/openai", "@ai-sdk/mcp"),
              commands={f"node {NODE_AGENTS}/vercel-ai.mjs": ()}),
    Framework(name="openai-agents-js", extra=None, npm=NODE_AGENTS, packages=("@openai/agents", "openai"),
              commands={f"node {NODE_AGENTS}/openai-agents.mjs": ()}),
)
"""Every framework on the card, in the order of its rows."""
ADAPTERS = {spec: cases for f in FRAMEWORKS for spec, cases in f.adapters.items()}
"""Every Python adapter spec -> its cases."""
COMMANDS = {line: cases for f in FRAMEWORKS for line, cases in f.commands.items()}
"""Every command adapter (a command line run from the repository's root) -> its cases."""

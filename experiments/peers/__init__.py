"""`make peers`: the exits test kit (`exitkit`) run over the frameworks people use, and over ours.

Nothing here measures: `__main__` hands the kit's adapters (`exitkit.adapters.*`) to
`exitkit.card.check` and writes the kit's report card as `results/peers.md` / `.json` / `.png`.
The main adapters run every case; the documented-setting variants (a framework's own fix for
tool errors, pydantic-ai's token limit, LangGraph's recursion limit one step either side, our
deliberately vague error wording) run only the case they are about. Needs the `peers` extra.
"""

NAME = "peers"
TITLE = "The five exits across the frameworks people use, measured at the mock"
ADAPTERS = {
    "exitkit.adapters.ours:Ours": (),
    "exitkit.adapters.plain:PlainLoop": (),
    "exitkit.adapters.agents_sdk:AgentsSDK": (),
    "exitkit.adapters.pydantic_ai:PydanticAI": (),
    "exitkit.adapters.langgraph:LangGraph": (),
    "exitkit.adapters.langgraph:LangGraphStepLess": ("turn_cap",),
    "exitkit.adapters.langgraph:LangGraphStepMore": ("turn_cap",),
    "exitkit.adapters.pydantic_ai:PydanticAITokenBudget": ("budget",),
    "exitkit.adapters.ours:OursGeneric": ("tool_error",),
    "exitkit.adapters.agents_sdk:AgentsSDKExplained": ("tool_error",),
    "exitkit.adapters.pydantic_ai:PydanticAIModelRetry": ("tool_error",),
    "exitkit.adapters.langgraph:LangGraphHandled": ("tool_error",),
}
"""Adapter spec -> the cases it runs (empty: every case), in the order of the card's rows."""

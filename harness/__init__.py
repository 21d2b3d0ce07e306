"""A small agent harness whose stopping, spending, approval and resume behaviour is measured.

    async with OpenAIChat("plan") as model:
        state = await run(new_run("Which file mentions a timeout?"), model=model,
                          tools=my_tools, store=MemoryStore())

The core (`loop`, `state`, `usage`, `tools`, `model`, `store`, `trace`, `approvals`) knows
nothing of the chapter's demo; `chapter` holds its tools, sandbox, system prompt and the designs
it argues against; `cli` wires them together. How a run stopped is `state.stop`, one of the
tagged values in `harness.state` (`Completed`, `Failed`, `MaxTurns`, `MaxBudget`, `Approval`,
`CancelledBy`).
"""

from harness.approvals import approve, reject
from harness.cancel import Cancel
from harness.client import ModelClient, OpenAIChat
from harness.codec import StateFileError
from harness.loop import Policy, run
from harness.model import Model, ProviderError
from harness.state import RunState, new_run, pending
from harness.store import FileStore, MemoryStore, Store
from harness.tools import PermanentToolError, Tool, ToolContext
from harness.trace import JsonlTrace, MemoryTrace
from harness.usage import Limits, Pricing, Usage

__all__ = [
    "Cancel",
    "FileStore",
    "JsonlTrace",
    "Limits",
    "MemoryStore",
    "MemoryTrace",
    "Model",
    "ModelClient",
    "OpenAIChat",
    "PermanentToolError",
    "Policy",
    "Pricing",
    "ProviderError",
    "RunState",
    "StateFileError",
    "Store",
    "Tool",
    "ToolContext",
    "Usage",
    "approve",
    "new_run",
    "pending",
    "reject",
    "run",
]

"""A small agent harness whose stopping, spending, approval and resume behaviour is measured.

    async with OpenAIChat("plan") as model:
        state = await run(new_run("Which file mentions a timeout?"), model=model,
                          tools=chapter_tools(make_sandbox("sandbox")), store=SQLiteStore("state/harness.db"))

The core (`loop`, `state`, `usage`, `tools`, `model`, `store`, `trace`, `approvals`) knows
nothing of the chapter's demo; `chapter` holds its tools, sandbox and the designs it argues
against; `cli` wires them together.
"""

from harness.approvals import approve, reject
from harness.cancel import Cancel, Cancelled
from harness.chapter import chapter_tools, make_sandbox
from harness.client import Completion, ModelClient, ProviderError
from harness.codec import StateFileError
from harness.loop import Policy, Progress, run
from harness.model import Model, OpenAIChat
from harness.state import (
    Approval,
    CancelledBy,
    Completed,
    Failed,
    MaxBudget,
    MaxTurns,
    RunState,
    Stop,
    new_run,
    pending,
)
from harness.store import MemoryStore, SQLiteStore, Store, open_store
from harness.tools import PermanentToolError, Tool, ToolContext
from harness.trace import JsonlTrace, MemoryTrace, TraceSink
from harness.usage import Limits, Pricing, Usage

__all__ = [
    "Approval",
    "Cancel",
    "Cancelled",
    "CancelledBy",
    "Completed",
    "Completion",
    "Failed",
    "JsonlTrace",
    "Limits",
    "MaxBudget",
    "MaxTurns",
    "MemoryStore",
    "MemoryTrace",
    "Model",
    "ModelClient",
    "OpenAIChat",
    "PermanentToolError",
    "Policy",
    "Pricing",
    "Progress",
    "ProviderError",
    "RunState",
    "SQLiteStore",
    "StateFileError",
    "Stop",
    "Store",
    "Tool",
    "ToolContext",
    "TraceSink",
    "Usage",
    "approve",
    "chapter_tools",
    "make_sandbox",
    "new_run",
    "open_store",
    "pending",
    "reject",
    "run",
]

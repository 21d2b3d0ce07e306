"""A small agent harness whose stopping, spending, approval and resume behaviour is measured.

    state = new_run("Which file mentions a timeout?")
    state = await run(state, options=RunOptions(model="plan", store=FileStore("state")))

Everything else lives in the submodules named for their concept: `state`, `loop`, `tools`,
`catalog`, `approvals`, `usage`, `client`, `store`, `trace`, `cancel`, `cli`.
"""

from harness.approvals import approve, reject
from harness.cancel import Cancel
from harness.catalog import default_tools, make_sandbox
from harness.cli import summary_line
from harness.client import ModelClient
from harness.loop import RunOptions, run
from harness.state import RunState, StateFileError, new_run, pending
from harness.store import FileStore, MemoryStore
from harness.tools import Tool, ToolContext
from harness.trace import JsonlTrace, MemoryTrace
from harness.usage import Limits, Pricing

__all__ = [
    "Cancel",
    "FileStore",
    "JsonlTrace",
    "Limits",
    "MemoryStore",
    "MemoryTrace",
    "ModelClient",
    "Pricing",
    "RunOptions",
    "RunState",
    "StateFileError",
    "Tool",
    "ToolContext",
    "approve",
    "default_tools",
    "make_sandbox",
    "new_run",
    "pending",
    "reject",
    "run",
    "summary_line",
]

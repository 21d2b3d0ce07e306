"""exitkit: run any agent through the five exits and judge it by what the provider saw.

Write an adapter (see `exitkit.contract` and docs/exitkit.md), then

    python -m exitkit run my_module:MyAdapter --out report/
    python -m exitkit run --command "node agent.mjs" --out report/   # any language: exitkit.command

The core imports the standard library, `mockprovider` and `httpx` only; the adapters in
`exitkit.adapters` import their framework, and only when named.
"""

from exitkit.contract import (
    LIMIT_NAMES,
    Adapter,
    Approve,
    Decision,
    Job,
    Limits,
    Outcome,
    Reject,
    Tool,
)
from exitkit.functions import ToolCancelled

__all__ = ["LIMIT_NAMES", "Adapter", "Approve", "Decision", "Job", "Limits", "Outcome", "Reject", "Tool",
           "ToolCancelled"]

"""`make peers`: the chapter's exits through the agent frameworks people run, and through ours.

One module per framework (`agents_sdk`, `pydantic_agent`, `langgraph_agent`) and one for our
harness (`ours`), each written as that project's documentation writes it and exposing the same
coroutines (see `case.py`). `measure.py` runs them against one mock wrapped in a journal
(`journal.py`), so every count is the provider's; `report.py` writes `results/peers.*`.
Needs the optional `peers` extra (`pip install -e '.[peers]'`).
"""

PEERS = ("agents_sdk", "pydantic_agent", "langgraph_agent", "ours")
"""Module names under `experiments.peers`, in the order of every table."""
NAME = "peers"
TITLE = "The five exits across the frameworks people use, measured at the mock"

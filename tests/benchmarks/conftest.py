"""Conversations of a chosen length, built the way a `runaway` run grows them."""

from __future__ import annotations

import json

import pytest

from mockprovider.scenarios import SCENARIOS, conversation

LISTING = "errors.log (2140 bytes)\naccess.log (812 bytes)\nnotes.txt (29 bytes)\nprivate.key (64 bytes)"


def runaway_messages(turns: int) -> list[dict]:
    """The request a `runaway` client sends at turn index `turns`."""
    messages: list[dict] = [
        {"role": "system", "content": "You are a careful assistant with file tools."},
        {"role": "user", "content": "Which file mentions a timeout?"},
    ]
    for _ in range(turns):
        reply = SCENARIOS["runaway"](conversation(messages))
        call = reply.tool_calls[0]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call.id, "content": LISTING})
    return messages


def request_body(turns: int) -> bytes:
    return json.dumps({"model": "runaway", "messages": runaway_messages(turns)}).encode()


@pytest.fixture(scope="session")
def runaway_100() -> list[dict]:
    return runaway_messages(100)


@pytest.fixture(scope="session")
def bodies() -> dict[int, bytes]:
    return {t: request_body(t) for t in (1, 50, 100)}

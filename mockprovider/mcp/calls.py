"""Tool calls as a test reads them: each `tools/call` in the journal, with what became of it.

A call is paired, by its session and JSON-RPC id, with the answer the server sent (a result,
or an error), the progress notifications it sent for it, and the server's notes (the effect it
ran, the answer it dropped, the session it ended, the wait a cancellation stopped).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Outcome = Literal["result", "tool_error", "error", "cancelled", "dropped", "pending"]
REQUEST_CANCELLED = -32800
"""The error the SDK's 2025 transport closes a cancelled call's stream with (no client reads it)."""


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One `tools/call` the MCP server received, and what became of it."""

    name: str
    arguments: Any
    id: Any
    """The JSON-RPC id the client gave the call."""
    session: str | None
    key: str | None
    """The idempotency key the client sent (`_meta.idempotencyKey`), if any."""
    outcome: Outcome
    """"result" (answered), "tool_error" (answered with `isError: true`), "error" (a JSON-RPC
    error), "cancelled" (stopped by the client's `notifications/cancelled`), "dropped" (its
    answer was lost with the connection, by script), "pending" (no answer yet)."""
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    status: int | None
    """The HTTP status its answer came with (404: its session had ended; None over stdio)."""
    progress: tuple[dict[str, Any], ...]
    """The `notifications/progress` params sent for it, in order."""
    effect: bool
    """Whether it ran its tool's side effect."""
    expired: bool
    """Whether its session ended once it was answered (an `expire` step)."""

    @property
    def text(self) -> str:
        """The text blocks of its result, joined by newlines ("" without a result)."""
        blocks = (self.result or {}).get("content") or []
        return "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def tool_calls(entries: Iterable[Any], name: str | None = None) -> list[ToolCall]:
    """The `tools/call`s among journal `entries`, oldest first; only `name`'s when given."""
    calls: dict[tuple[Any, Any], dict[str, Any]] = {}
    tokens: dict[tuple[Any, Any], tuple[Any, Any]] = {}
    for entry in entries:
        if entry.kind != "mcp":
            continue
        body = entry.body
        if entry.direction == "in" and isinstance(body, dict) and body.get("method") == "tools/call":
            params = body.get("params") if isinstance(body.get("params"), dict) else {}
            meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
            key = (entry.session, _hashable(body.get("id")))
            calls[key] = {"name": params.get("name"), "arguments": params.get("arguments"),
                          "id": body.get("id"), "session": entry.session, "key": meta.get("idempotencyKey"),
                          "result": None, "error": None, "status": None, "progress": [], "notes": set()}
            if "progressToken" in meta:
                tokens[(entry.session, _hashable(meta["progressToken"]))] = key
        elif entry.direction == "out" and isinstance(body, dict):
            _answer(calls, tokens, entry, body)
        elif entry.direction == "note" and isinstance(body, dict):
            call = calls.get((entry.session, _hashable(body.get("id"))))
            if call is not None:
                call["notes"].add(body.get("event"))
    return [_view(call) for call in calls.values() if name is None or call["name"] == name]


def _answer(calls: dict, tokens: dict, entry: Any, body: dict[str, Any]) -> None:
    if body.get("method") == "notifications/progress" and isinstance(body.get("params"), dict):
        key = tokens.get((entry.session, _hashable(body["params"].get("progressToken"))))
        if key in calls:
            calls[key]["progress"].append(body["params"])
        return
    call = calls.get((entry.session, _hashable(body.get("id"))))
    if call is None and body.get("id") is None and entry.tool is not None:
        # The transport's refusal (404 for an ended session) names no id: it answers the newest
        # unanswered call of that tool in that session, the request it came back on.
        waiting = [c for c in calls.values() if c["session"] == entry.session and c["name"] == entry.tool
                   and c["result"] is None and c["error"] is None]
        call = waiting[-1] if waiting else None
    if call is not None and call["result"] is None and call["error"] is None:
        call["result"], call["error"], call["status"] = body.get("result"), body.get("error"), entry.status


def _view(call: dict[str, Any]) -> ToolCall:
    notes, error, result = call["notes"], call["error"], call["result"]
    outcome: Outcome
    if "dropped" in notes:
        outcome = "dropped"
    elif ("stopped" in notes and not error) or (isinstance(error, dict)
                                                  and error.get("code") == REQUEST_CANCELLED):
        outcome = "cancelled"
    elif error is not None:
        outcome = "error"
    elif result is not None:
        outcome = "tool_error" if isinstance(result, dict) and result.get("isError") else "result"
    else:
        outcome = "pending"
    return ToolCall(name=call["name"], arguments=call["arguments"], id=call["id"], session=call["session"],
                    key=call["key"] if isinstance(call["key"], str) else None, outcome=outcome, result=result,
                    error=error, status=call["status"], progress=tuple(call["progress"]),
                    effect="effect" in notes,
                    expired="expired" in notes)


def _hashable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else repr(value)

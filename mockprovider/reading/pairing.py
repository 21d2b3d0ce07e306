"""Which call a tool result answers, in formats whose results may carry no call id.

Gemini's `functionResponse` parts (as google-genai's automatic function calling sends them) and
Ollama's `tool` messages (as its Python client sends them) name the tool, or nothing, instead of
a call id. A result with an id answers that call; one without answers the earliest call still
unanswered (of its tool's name, when it gives one). A result that answers nothing is a 400, as
a tool message answering no call is on the chat route. The calls keep the ids the request
gave them, so the conversation reads, and counts, as the chat route's would.

The chat route's own errors for a tool message answering no call, answering one twice, or a call
left unanswered are here too, beside these rules.
"""

from __future__ import annotations

from collections import OrderedDict

from mockprovider.errors import APIError, invalid


class Calls:
    """The calls a request's transcript made so far, and which are still unanswered, in order.

    `result` and `call` name the two parts as the format calls them, for error messages. Each
    answer costs the same however many calls are waiting: a body under the size cap may hold
    thousands, and the request is read on the event loop.
    """

    def __init__(self, *, result: str, call: str) -> None:
        self.result, self.call = result, call
        self.ids: set[str] = set()
        self.added = 0
        # OrderedDicts, not dicts: a dict emptied from the front scans its dead slots to find
        # the first live one.
        self.pending: OrderedDict[int, tuple[str, str]] = OrderedDict()
        """Each unanswered call by its position in the request: (id, name), in order."""
        self.of_id: dict[str, OrderedDict[int, None]] = {}
        self.of_name: dict[str, OrderedDict[int, None]] = {}
        """The positions of the unanswered calls of each id and of each name, in order."""

    def add(self, call_id: str, name: str) -> None:
        self.ids.add(call_id)
        k = self.added
        self.added += 1
        self.pending[k] = (call_id, name)
        self.of_id.setdefault(call_id, OrderedDict())[k] = None
        self.of_name.setdefault(name, OrderedDict())[k] = None

    def _take(self, k: int) -> str:
        call_id, name = self.pending.pop(k)
        del self.of_id[call_id][k]
        del self.of_name[name][k]
        return call_id

    def answer(self, call_id: str | None, name: str | None, param: str) -> str:
        """The id of the call a result answers (`param` names the result); a 400 if none."""
        if call_id is not None:
            if call_id not in self.ids:
                raise invalid(
                    f"Invalid value at '{param}': {self.result} answers {call_id!r}, which no earlier "
                    f"{self.call} in the request has as its id.",
                    param=param,
                )
            for k in self.of_id.pop(call_id, ()):  # every call sharing the id, answered at once
                del self.of_name[self.pending.pop(k)[1]][k]
            return call_id
        waiting = self.pending if name is None else self.of_name.get(name, OrderedDict())
        if waiting:
            return self._take(next(iter(waiting)))
        of = f" of the name {name!r}" if name is not None else ""
        raise invalid(
            f"Invalid value at '{param}': {self.result} answers no earlier {self.call}{of} that is "
            "still unanswered in the request.",
            param=param,
        )


# The chat route's stricter pairing (`transcript.read`) refuses in the real API's wording and `param`
# (docs/conformance.md cites where each was seen).


def orphan(i: int) -> APIError:
    return invalid(
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
        "'tool_calls'.",
        param=f"messages.[{i}].role",
    )


def duplicate(call_id: str, i: int) -> APIError:
    return invalid(
        f"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
        f"'tool_calls'; tool_call_id {call_id!r} is already answered by an earlier tool message.",
        param=f"messages.[{i}].role",
    )


def unanswered(pending: dict[str, int]) -> APIError:
    """The assistant message whose calls `pending` holds was not followed by an answer to each."""
    at = next(iter(pending.values()))
    return invalid(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: " + ", ".join(pending),
        param=f"messages.[{at}].role",
    )

"""Which call a tool result answers, in formats whose results may carry no call id.

Gemini's `functionResponse` parts (as google-genai's automatic function calling sends them) and
Ollama's `tool` messages (as its Python client sends them) name the tool, or nothing, instead of
a call id. A result with an id answers that call; one without answers the earliest call still
unanswered (of its tool's name, when it gives one). A result that answers nothing is a 400, as
a tool message answering no call is on the chat route. The calls keep the ids the request
gave them, so the conversation reads, and counts, as the chat route's would.
"""

from __future__ import annotations

from collections import OrderedDict

from mockprovider.errors import invalid


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
        self.of_id: dict[str, list[int]] = {}
        self.of_name: dict[str, OrderedDict[int, None]] = {}
        """The positions of the unanswered calls of each id and of each name, in order."""

    def add(self, call_id: str, name: str) -> None:
        self.ids.add(call_id)
        k = self.added
        self.added += 1
        self.pending[k] = (call_id, name)
        self.of_id.setdefault(call_id, []).append(k)
        self.of_name.setdefault(name, OrderedDict())[k] = None

    def _take(self, k: int) -> str:
        call_id, name = self.pending.pop(k)
        self.of_id[call_id].remove(k)  # as many positions as calls sharing the id: one, mostly
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
            for k in list(self.of_id[call_id]):
                self._take(k)
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

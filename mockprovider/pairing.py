"""Which call a tool result answers, in formats whose results may carry no call id.

Gemini's `functionResponse` parts (as google-genai's automatic function calling sends them) and
Ollama's `tool` messages (as its Python client sends them) name the tool, or nothing, instead of
a call id. A result with an id answers that call; one without answers the earliest call still
unanswered (of its tool's name, when it gives one). A result that answers nothing is a 400, as
a tool message answering no call is on the chat route. The calls keep the ids the request
gave them, so the conversation reads, and counts, as the chat route's would.
"""

from __future__ import annotations

from mockprovider.errors import invalid


class Calls:
    """The calls a request's transcript made so far, and which are still unanswered, in order.

    `result` and `call` name the two parts as the format calls them, for error messages.
    """

    def __init__(self, *, result: str, call: str) -> None:
        self.result, self.call = result, call
        self.ids: set[str] = set()
        self.pending: list[tuple[str, str]] = []

    def add(self, call_id: str, name: str) -> None:
        self.ids.add(call_id)
        self.pending.append((call_id, name))

    def answer(self, call_id: str | None, name: str | None, param: str) -> str:
        """The id of the call a result answers (`param` names the result); a 400 if none."""
        if call_id is not None:
            if call_id not in self.ids:
                raise invalid(
                    f"Invalid value at '{param}': {self.result} answers {call_id!r}, which no earlier "
                    f"{self.call} in the request has as its id.",
                    param=param,
                )
            self.pending = [(i, n) for i, n in self.pending if i != call_id]
            return call_id
        for k, (pending_id, pending_name) in enumerate(self.pending):
            if name is None or pending_name == name:
                del self.pending[k]
                return pending_id
        of = f" of the name {name!r}" if name is not None else ""
        raise invalid(
            f"Invalid value at '{param}': {self.result} answers no earlier {self.call}{of} that is "
            "still unanswered in the request.",
            param=param,
        )

"""The chat request an agent loop sends, answered as soon as its bytes are parsed: no coroutine, no
`Request`, no ASGI message (`cycle.ANSWERS_AT_ONCE`, which `app.MockApp` answers through here).

It takes only a request whose reply is a plain JSON one that waits for nothing, and runs the
chat lane's steps in the lane's order (`chat.answer`), so its reply, and its log line when the
server logs each request, are the lane's (tests/mockprovider/apis/test_chat_at_once.py). Any
other request (a stream, a refusal, an option, a fault or a latency, a key, a journal, a test's
set-up, a count left to do, a large body) is left to the lane, with nothing sent or logged. What
this saves is the lane's coroutines, the request objects and the ASGI messages around them
(results/bench.md, speed tricks: "a chat request answered at once").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.types import Scope

from mockprovider.apis import chat
from mockprovider.apis.chat_request import chat_request
from mockprovider.apis.steps import held
from mockprovider.errors import APIError
from mockprovider.offload import LARGE_BYTES
from mockprovider.reading import transcript
from mockprovider.reading.body import READ_ALREADY, read_chat_body
from mockprovider.reading.request_headers import TEST_ID_HEADER, scope_headers
from mockprovider.replies import headers
from mockprovider.replies.caching import NO_CACHE, OPENAI_MIN_TOKENS
from mockprovider.replies.faults import log as faults_log
from mockprovider.replies.faults import log_request, sent_attempt
from mockprovider.replies.finished import finish, prompt_cache_here


def answer(state: dict[str, Any], scope: Scope, raw: bytes, send_whole: Callable[[bytes, bytes], None],
           record: Callable[[str, int, str, float], None] | None) -> bool:
    """Whether the chat request `scope` with the body `raw` was answered here: its reply's header
    lines and body given to `send_whole`, then counted by `record` (the lane's metrics). False,
    having sent nothing, for a request the lane must answer. `state` is the app's state dict."""
    config = state["config"]  # read once: what is checked is what answers
    if not might_answer(config, scope, len(raw)):
        return False
    started = scope.setdefault(headers.STARTED, time.perf_counter())  # a held request's: when its head came
    try:
        replied = _reply(config, scope, raw)
    except Exception:  # a refusal, or anything unforeseen: the lane meets it again and answers it
        replied = None
    if replied is None:
        scope.pop(chat.LATER, None)  # the lane counts the transcript again, and remembers it itself
        return False
    scenario, out = replied
    send_whole(scope[headers.JSON_HEAD] + headers.LENGTH_AND_TYPE % len(out), out)
    if (later := scope.pop(chat.LATER, None)) is not None:
        later()
    if record is not None:
        record(chat.ROUTE, 200, scenario, time.perf_counter() - started)
    return True


def may_hold(state: dict[str, Any], scope: Scope, length: int) -> bool:
    """Whether the chat request `scope`, whose head came without its body of `length` bytes, may be
    held for it (`might_answer`); if so, its clock starts now, as the lane's would have."""
    if not might_answer(state["config"], scope, length):
        return False
    scope[headers.STARTED] = time.perf_counter()
    return True


def might_answer(config: Any, scope: Scope, length: int) -> bool:
    """Whether `answer` might answer the chat request `scope` with a body of `length` bytes, by
    what it shows before its body is read: the server's settings `config` (no key, no journal, the
    size caps, no attempts counted for the log line) and its headers (JSON, no options, no test)."""
    if (config.api_key is not None or config.journal is not None or length > config.max_body_bytes
            or length > LARGE_BYTES
            # a logged attempt the server counts (`reading.attempts`), not the one the client states
            or (config.defaults.attempt == "seen" and faults_log.isEnabledFor(logging.INFO))):
        return False
    content_type = None
    for name, value in scope["headers"]:
        if name == b"content-type":
            content_type = value if content_type is None else content_type  # the first, as `header_map`
        elif name.startswith(b"x-mock") or name == TEST_ID_HEADER:
            return False
    return content_type == b"application/json"


def _reply(config: Any, scope: Scope, raw: bytes) -> tuple[str, bytes] | None:
    """The scenario's name and the JSON reply's body, its headers left in `scope`; None for a
    request the lane must answer. The lane's steps (`chat.answer`), in its order; what is read of
    the body, or the refusal of it, is left for the lane, should it answer (`READ_ALREADY`): a
    stream, say, is not read twice."""
    try:
        body, messages = scope[READ_ALREADY] = read_chat_body(raw)
    except APIError as refused:
        scope[READ_ALREADY] = refused
        raise
    req = chat_request(body, messages)
    name, _, suffix = req.model.partition("+")
    script, options = config.scenarios.get(name), config.defaults
    if (req.stream or suffix or script is None or getattr(script, "options", "")
            or options.faults or options.latency_ms):
        return None
    logged = faults_log.isEnabledFor(logging.INFO)  # the lane's log line, logged last here
    read = req.transcript
    if read.remember is not None:  # remembered once the reply is written, as by the lane
        read = chat.remembered_later(read, scope)
    done = transcript.counted_already(read, req.tools)
    if done is None:
        return None
    conversation, prompt_tokens = done
    reply = script(conversation)
    if reply.latency_ms or reply.error is not None:
        return None
    reply, options = held(reply, script, read.turn, req.tools, options, req.tool_choice)
    cache = (NO_CACHE if prompt_tokens < OPENAI_MIN_TOKENS
             else prompt_cache_here(read.messages, prompt_tokens, read.turn, options))
    if cache is None:
        return None
    scope[headers.AS_LINES] = True
    out = chat.render(finish(reply, scope, req.model, prompt_tokens, req.max_tokens, cache, options))
    if logged:  # once nothing is left to decline (the lane would log it again), before the reply
        log_request(req.model, read.turn, sent_attempt(scope_headers(scope)), "ok")
    return name, out

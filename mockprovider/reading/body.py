"""A request's body read: the key, the content type, the size cap, the journal, then its JSON.

Every surface reads its body here (`read_raw`, `read_json`); the chat route reads its messages
in the same pass (`read_chat`), so that its request is read in one visit to this folder and its
counting finished in one more (`transcript.counted`).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any, Protocol

from starlette.requests import Request
from starlette.types import Message

from mockprovider.errors import APIError, ClientGone, missing
from mockprovider.journal import Journal, headers_of
from mockprovider.reading import attempts, memo, transcript
from mockprovider.reading.request_headers import declared_length, header, header_map, test_id
from mockprovider.reading.transcript import Transcript
from mockprovider.reading.validation import (
    MAX_DEPTH,
    check_depth,
    parse_body,
    parse_json,
    refuse_lone_surrogates,
)

SIGV4 = "AWS4-HMAC-SHA256 "


class Rules(Protocol):
    """What reading a body needs of the server's settings (`apis.steps.Config` has it)."""

    api_key: str | None
    max_body_bytes: int
    journal: Journal | None


def authorize(request: Request, rules: Rules) -> None:
    if rules.api_key is None:
        return
    # Anthropic's clients send the key as x-api-key, Azure's as api-key, Google's as
    # x-goog-api-key or ?key=; AWS's SDKs sign with it (SigV4, its access key id the key: the
    # signature is not verified); every other client as a bearer token.
    key = (header(request, b"x-api-key") or header(request, b"api-key") or header(request, b"x-goog-api-key")
           or request.query_params.get("key"))
    given = f"Bearer {key}" if key is not None else header(request, b"authorization") or ""
    if given.startswith(SIGV4):
        given = "Bearer " + given.partition("Credential=")[2].partition("/")[0]
    if not given:
        raise APIError(
            401,
            "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY' "
            "(or 'x-api-key: YOUR_KEY').",
            code="missing_api_key",
        )
    if not hmac.compare_digest(given.encode(), f"Bearer {rules.api_key}".encode()):
        raise APIError(401, "Incorrect API key provided.", code="invalid_api_key")


def _check_content_type(headers: Mapping[bytes, bytes]) -> None:
    value = headers.get(b"content-type", b"")
    if value == b"application/json":  # as every client we know sends it
        return
    media = value.decode("latin-1").split(";")[0].strip().lower()
    if media != "application/json":
        raise APIError(
            415,
            f"Unsupported content type {media or '(none)'!r}; send 'application/json'.",
            code="unsupported_media_type",
        )


def _too_large(limit: int) -> APIError:
    return APIError(413, f"Request body is larger than the limit of {limit} bytes.", code="request_too_large")


async def _read_body(request: Request, declared: bytes, limit: int, first: Message | None = None) -> bytes:
    """The body, its declared length and then its size held to `limit`; `first`: its first
    message, when the caller has read it."""
    if (length := declared_length(declared)) is not None and length > limit:
        raise _too_large(limit)
    # ASGI messages read directly, without Request.stream()'s async generator: a short body
    # comes in one message and is returned as it is.
    chunks, size, more = [], 0, True
    while more:
        message, first = first or await request.receive(), None
        if message["type"] != "http.request":  # http.disconnect: nobody is left to answer
            raise ClientGone
        chunk, more = message.get("body", b""), message.get("more_body", False)
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        if not (more or chunks):
            return chunk  # the whole body in one message, as a short request comes
        chunks.append(chunk)
    return b"".join(chunks)


def _admitted(request: Request, rules: Rules, any_content_type: bool) -> Mapping[bytes, bytes]:
    """The request's headers, once its key and (unless `any_content_type`) its content type pass."""
    authorize(request, rules)
    headers = header_map(request)
    if not any_content_type:
        _check_content_type(headers)
    return headers


def _kept(request: Request, rules: Rules, raw: bytes) -> None:
    """`raw` kept for counting attempts, and journalled under its test (a malformed test id is
    refused whatever else is on)."""
    attempts.keep_body(request, raw)
    tested = test_id(request)
    if rules.journal is not None:
        rules.journal.record_raw(method=request.method, path=request.url.path,
                                 headers=headers_of(request.headers.items()), raw=raw, test_id=tested)


async def read_raw(request: Request, rules: Rules, *, any_content_type: bool = False) -> bytes:
    """The request's body, after auth, content type (unless `any_content_type`) and the size cap."""
    headers = _admitted(request, rules, any_content_type)
    raw = await _read_body(request, headers.get(b"content-length", b""), rules.max_body_bytes)
    _kept(request, rules, raw)
    return raw


async def read_json(request: Request, rules: Rules, *, whole_unicode: bool = False) -> Any:
    """The request's JSON body, after auth, content type, the size cap and the depth bound;
    `whole_unicode`: refused if a string holds a lone surrogate, as OpenAI and Anthropic refuse it."""
    raw = await read_raw(request, rules)
    body = parse_body(raw)
    if whole_unicode:
        refuse_lone_surrogates(raw, body)
    return body


async def read_chat(request: Request, rules: Rules) -> tuple[Any, Transcript | APIError]:
    """The chat route's body (as `read_json`, parsed by `memo.parse`) and its messages read:
    checked and (most of them) counted (`memo` remembers them between turns), or why they cannot
    be, for the route to raise after checking `model`, which the API names first. A plain tuple,
    not a record: it is built for every request (results/bench.md, speed tricks)."""
    headers = _admitted(request, rules, False)  # `read_raw`'s steps, one coroutine fewer per request
    declared, limit = headers.get(b"content-length", b""), rules.max_body_bytes
    # `_read_body`'s common case written in: a declared length within the cap, the whole body in
    # one message; anything else goes on to `_read_body`, from the message read here.
    within = (length := declared_length(declared)) is not None and length <= limit
    message = await request.receive() if within else None
    if message is not None and message["type"] == "http.request" and not message.get("more_body", False) \
            and len(raw := message.get("body", b"")) <= limit:
        pass
    else:
        raw = await _read_body(request, declared, limit, message)
    _kept(request, rules, raw)
    read = request.scope.pop(READ_ALREADY, None)
    if read is None:
        return read_chat_body(raw)
    if isinstance(read, APIError):
        raise read
    return read


READ_ALREADY = "mockprovider.chat_body_read"
"""Where `read_chat_body`'s result (or its refusal) waits for `read_chat`, when this request was read
already (`apis.chat_at_once`, which declined it after reading): the same bytes, not read twice."""


def read_chat_body(raw: bytes) -> tuple[Any, Transcript | APIError]:
    """`read_chat`'s reading of the body `raw`: parsed, checked, its messages read (or why they
    cannot be); `APIError` if it is no JSON a chat route takes."""
    body, known = parse_json(raw, memo.parse)
    # The checks below written in for a body they would pass at a glance (results/bench.md, speed
    # tricks: "the chat route's common case written in"): few brackets, no escape, no byte 0xED,
    # and UTF-8 (`validation.wide`: in UTF-16 or -32 those byte searches see no escape).
    if known is not None or raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        check_depth(raw, body, known)
    if known is not None or raw.find(b"\\u") >= 0 or raw.find(b"\xed") >= 0 or raw.find(b"\x00", 0, 4) >= 0:
        refuse_lone_surrogates(raw, body, known)
    if type(body) is not dict:  # refused by the route before it looks at messages
        return body, missing("messages")
    try:
        return body, transcript.read(body.get("messages"), known)
    except APIError as error:
        return body, error

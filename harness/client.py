"""The model seam: one chat-completions call over httpx, with retries and cancellation.

Configuration comes from the environment like any OpenAI client: `LLM_BASE_URL` (default the
local mock) and `LLM_API_KEY`. `OPENAI_API_KEY` is sent only to OpenAI's own API
(https://api.openai.com): a key meant for OpenAI must not go, in clear, to whatever happens to
listen on a local port. Tests inject an `httpx` transport.

A reply counts only once it is valid: usage must be whole numbers in [0, 10**9) (a negative
count would make cost negative and switch a budget off; a 400-digit one overflows the price),
else the body is malformed and retried like any other. Each attempt has an overall deadline
(`deadline_s`), not just a per-read timeout, so a body trickled byte by byte cannot hold a turn.
429, 5xx, malformed bodies and connection errors are retried a bounded number of times with
exponential backoff, honouring `retry-after-ms` / `Retry-After`; each attempt carries
`x-lab-attempt: N` (0-based) so the mock's stateless faults know which attempt this is.
Anything else (400/401/403/404…) is final and raised as `ProviderError` with the provider's
own message.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
import math
import os
import random
import re
import ssl
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

import o200k
from harness.body import Bodies
from harness.cancel import Cancel
from harness.http1 import Origin
from harness.model import Completion, ProviderError
from harness.usage import Usage

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=5.0)
DEFAULT_DEADLINE_S = 120.0
MAX_USAGE_TOKENS = 10**9
"""Usage counts at or above this are not a real reply (no context window is that large)."""
OPENAI_HOST = "api.openai.com"
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""529: overloaded, as Anthropic (and its OpenAI-compatible endpoint) says it is busy."""
_HTTPX_LOG = logging.getLogger("httpx")
_OWN_HEADERS = frozenset({"host", "content-length", "content-type", "transfer-encoding", "x-lab-attempt"})
"""Headers the request sets itself: a call that names one gets httpx's merging, as `json=` had."""

_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_FIELD_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")
"""A header's name and value as h11 (httpx's HTTP/1.1) accepts them."""


@functools.cache
def _httpx_transport_imports() -> None:
    """httpx's transport (httpcore) and what its first connection needs (httpcore's anyio backend,
    anyio's asyncio one): imported by the first client that will use them, so that a run's first
    turn does not pay for them, and a process whose clients never do (plain http) never does."""
    for name in ("httpcore._backends.anyio", "anyio._backends._asyncio"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _proxied(url: httpx.URL) -> bool:
    """Whether httpx would send a request for `url` through a proxy the environment names
    (HTTP_PROXY, ALL_PROXY…, less NO_PROXY): its own patterns, in its own order."""
    from httpx._utils import URLPattern, get_environment_proxies

    mounts = dict(sorted({URLPattern(k): v for k, v in get_environment_proxies().items()}.items()))
    return next((proxy is not None for pattern, proxy in mounts.items() if pattern.matches(url)), False)


class _OnFirstUse(httpx.AsyncBaseTransport):
    """httpx's own transport for a client whose requests go over `http1.Origin`, built (and
    httpcore imported) only when one of them does not (a cookie to send, httpx's log on)."""

    def __init__(self, verify: ssl.SSLContext) -> None:
        self._verify = verify
        self._transport: httpx.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._transport is None:
            self._transport = httpx.AsyncHTTPTransport(verify=self._verify)
        return await self._transport.handle_async_request(request)

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()


def shared_tls() -> ssl.SSLContext:
    """The trust store, loaded once per process and shared by every client we build: loading it
    costs more than a loopback turn, and a process running many runs need not reload it each time.
    Kept per SSL_CERT_FILE / SSL_CERT_DIR, so a trust store named after the first client still counts."""
    return _trust_store(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _trust_store(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()  # it reads both variables itself; they are the cache's key


@functools.cache
def _no_tls() -> ssl.SSLContext:
    """For a plain-http provider, which never speaks TLS: a context that trusts nothing, so the
    trust store is never loaded for it, and a TLS connection it somehow made would fail closed."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class _Retryable(Exception):
    def __init__(self, message: str, *, status: int | None = None, wait_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.wait_s = wait_s


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds the provider asked us to wait, if it said so sensibly (else: our backoff)."""
    for header, scale in (("retry-after-ms", 1000), ("retry-after", 1)):
        try:
            wait = float(response.headers.get(header, "")) / scale
        except ValueError:
            continue
        if math.isfinite(wait) and wait >= 0:
            return wait
    return None


def _error_message(response: httpx.Response) -> tuple[str, str | None]:
    try:
        err = response.json().get("error") or {}
        return str(err.get("message") or response.text), err.get("code")
    except (ValueError, AttributeError):
        return response.text or f"HTTP {response.status_code}", None


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is {type(value).__name__}, not a string")
    return value


def _tokens(usage: Any, name: str) -> int:
    value = usage[name]
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_USAGE_TOKENS:
        raise ValueError(
            f"usage.{name} is {str(value)[:40]!r}, not a whole number in [0, {MAX_USAGE_TOKENS})"
        )
    return value


def _parse(data: Any) -> tuple[dict[str, Any], str, Usage]:
    """The reply message, finish reason and usage; TypeError/KeyError/... when malformed."""
    choice = data["choices"][0]
    raw = choice["message"]
    content = raw.get("content")
    if content is not None:
        _str(content, "message.content")
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if raw.get("tool_calls"):
        message["tool_calls"] = [
            {"id": _str(c["id"], "tool_calls[].id"), "type": "function",
             "function": {"name": _str(c["function"]["name"], "function.name"),
                          "arguments": _str(c["function"]["arguments"], "function.arguments")}}
            for c in raw["tool_calls"]
        ]
        seen: set[str] = set()  # a set: thousands of calls (a hostile reply) stay linear
        for c in message["tool_calls"]:
            if c["id"] in seen:
                # Answers are matched to calls by id: a reused id would swallow the second call.
                raise ValueError(f"tool call id {c['id']!r} is reused within one reply")
            seen.add(c["id"])
    u = data["usage"]
    prompt, completion = _tokens(u, "prompt_tokens"), _tokens(u, "completion_tokens")
    usage = Usage(
        prompt_tokens=prompt, completion_tokens=completion,
        cached_tokens=_detail(u, "prompt_tokens_details", "cached_tokens", prompt),
        cache_write_tokens=_detail(u, "prompt_tokens_details", "cache_write_tokens", prompt),
        reasoning_tokens=_detail(u, "completion_tokens_details", "reasoning_tokens", completion),
    )
    return message, str(choice.get("finish_reason") or "stop"), usage


def _detail(usage: Any, details: str, name: str, total: int) -> int:
    """A part of a usage total (`usage[details][name]`); 0 when the provider does not report it."""
    value = (usage.get(details) or {}).get(name)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= total:
        raise ValueError(f"usage.{details}.{name} is {str(value)[:40]!r}, not a whole number in [0, {total}]")
    return value


class ModelClient:
    """An OpenAI-compatible chat-completions client. Use `async with` or call `aclose()`."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        backoff_s: float = 0.25,
        max_wait_s: float = 20.0,
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> None:
        self.base_url = (base_url or os.environ.get("LLM_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or _env_key(self.base_url)
        headers = {"authorization": f"Bearer {key}"} if key else {}
        # Parsed once, not per request; the path goes before a query (Azure's `?api-version=`).
        base = httpx.URL(self.base_url)
        self._url = base.copy_with(path=base.path.rstrip("/") + "/chat/completions")
        self.deadline_s = deadline_s
        """Longest one attempt may take, from sending to the last byte of the body."""
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        # A plain-http provider reached directly, credentials in the URL aside (httpx's to send,
        # as Basic auth), gets our own keep-alive connections (`http1.Origin`); httpx's transport
        # is built only for what they do not carry.
        self._origin_pool: Origin | None = None
        if transport is not None:
            verify: ssl.SSLContext | bool = True  # a given transport brings its own
        elif self._url.scheme == "https":
            verify = shared_tls()
        else:
            verify = _no_tls()
            if not self._url.userinfo and not _proxied(self._url):
                timeouts = httpx.Timeout(timeout).as_dict()
                self._origin_pool = Origin(self._url.host, self._url.port or 80, timeouts)
                transport = _OnFirstUse(verify)
        if self._origin_pool is None:
            _httpx_transport_imports()
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout, headers=headers, verify=verify)
        self._bodies = Bodies()
        # The lean send (`_send`) needs the transport for our one URL (a proxy's, when the
        # environment names one): chosen once, as httpx would choose it for every request.
        pick = getattr(self._http, "_transport_for_url", None)
        self._transport = pick(self._url) if pick is not None and not self._url.userinfo else None
        self._timeout = self._http.timeout.as_dict()
        self._target = b"POST %s HTTP/1.1\r\n" % self._url.raw_path
        self._head: tuple[tuple[tuple[str, str], ...] | None, list[tuple[bytes, bytes]] | None,
                          bytes | None] = (None, [], None)

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._bodies.clear()
        if self._origin_pool is not None:
            await self._origin_pool.aclose()
        await self._http.aclose()

    async def complete(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        cancel: Cancel | None = None,
        headers: dict[str, str] | None = None,
    ) -> Completion:
        """One completion; raises `ProviderError` (final) or `Cancelled` (signal set)."""
        body = self._bodies.body(model, messages, tools, max_tokens)
        cancel = cancel or Cancel()
        for attempt in range(self.max_retries + 1):
            try:
                with cancel.cancels_this_task():
                    message, finish, usage = await self._attempt(body, attempt, headers or {})
                return Completion(message=message, finish_reason=finish, usage=usage, attempts=attempt + 1)
            except _Retryable as e:
                if attempt == self.max_retries:
                    raise ProviderError(
                        f"gave up after {attempt + 1} attempts: {e}", status=e.status
                    ) from None
                if e.wait_s is not None and e.wait_s > self.max_wait_s:
                    # Retrying before the provider said to would only be refused again.
                    raise ProviderError(
                        f"{e} (asked to retry after {e.wait_s:g} s, more than max_wait_s="
                        f"{self.max_wait_s:g})", status=e.status
                    ) from None
                wait = e.wait_s if e.wait_s is not None else self.backoff_s * 2**attempt
                await cancel.sleep(wait * random.uniform(1.0, 1.1))
        raise AssertionError("unreachable")

    def _origin(self) -> str:
        """The provider's scheme, host and port: never its path, query or credentials."""
        url = httpx.URL(self.base_url)
        return f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")

    def _headers(self, headers: dict[str, str], attempt: int,
                 length: int) -> list[tuple[bytes, bytes]] | None:
        """The request's headers as httpx orders them for `json=`: Host, the client's, the call's,
        then the body's; None when the call names one of `_OWN_HEADERS` (httpx merges those)."""
        extra = tuple(headers.items())
        if extra != self._head[0]:
            if any(name.lower() in _OWN_HEADERS for name in headers):
                self._head = (extra, None, None)
            else:
                merged = httpx.Headers(self._http.headers)
                merged.update(headers)
                raw = [(b"Host", self._url.netloc), *merged.raw]
                self._head = (extra, raw, self._wire_head(raw))
        if self._head[1] is None:
            return None
        return [*self._head[1], (b"x-lab-attempt", b"%d" % attempt), (b"Content-Length", b"%d" % length),
                (b"Content-Type", b"application/json")]

    def _wire_head(self, raw: list[tuple[bytes, bytes]]) -> bytes | None:
        """The request line and `raw` as h11 writes them; None if h11 would refuse one (then the
        request takes httpx's path, and fails there as it always did)."""
        if not all(_TOKEN.fullmatch(name) and _FIELD_VALUE.fullmatch(value) for name, value in raw):
            return None
        return self._target + b"".join(b"%s: %s\r\n" % pair for pair in raw)

    async def _send(self, body: bytes, attempt: int, headers: dict[str, str]) -> httpx.Response:
        """POST `body`. Straight to the transport when nothing of the client's own machinery has
        work to do (no credentials in the URL, no cookie in its jar, httpx's request log off, the
        client open): a request built whole, no per-request merging, auth flow, redirect check or
        cookie parsing; for a plain-http provider reached directly, the transport is our own
        keep-alive connections, the bytes on the wire httpx's. Otherwise, and for a reply that
        sets a cookie, the client does as it always does."""
        raw = self._headers(headers, attempt, len(body))
        if raw is None:
            request = self._http.build_request("POST", self._url, content=body,
                                               headers={**headers, "x-lab-attempt": str(attempt)})
            request.headers.setdefault("Content-Type", "application/json")  # after Content-Length
            return await self._http.send(request)
        transport = self._transport
        if (transport is None or self._http.cookies or self._http.is_closed
                or _HTTPX_LOG.isEnabledFor(logging.INFO)):
            request = self._http.build_request("POST", self._url, content=body, headers=raw[1:])
            return await self._http.send(request)
        # The body as a stream already read: what `content=` gives, without its header merging.
        request = httpx.Request("POST", self._url, headers=raw, stream=httpx.ByteStream(body),
                                extensions={"timeout": self._timeout})
        request.read()
        if self._origin_pool is not None and (head := self._head[2]) is not None:
            response = await self._origin_pool.post(
                head + b"x-lab-attempt: %d\r\nContent-Length: %d\r\nContent-Type: application/json\r\n\r\n"
                % (attempt, len(body)), body)
            response.request = request
        else:
            response = await transport.handle_async_request(request)
            response.request = request
            try:
                await response.aread()
            except BaseException:
                await response.aclose()
                raise
        if "set-cookie" in response.headers:
            self._http.cookies.extract_cookies(response)
        return response

    async def _attempt(
        self, body: bytes, attempt: int, headers: dict[str, str]
    ) -> tuple[dict[str, Any], str, Usage]:
        try:
            async with asyncio.timeout(self.deadline_s):
                response = await self._send(body, attempt, headers)
        except TimeoutError:
            raise _Retryable(f"no complete reply within the {self.deadline_s:g} s deadline") from None
        except httpx.ConnectError as e:
            # Say where: a reader who has not started a provider sees which address was tried.
            raise _Retryable(f"ConnectError: {e} (nothing accepts connections at {self._origin()})") from None
        except (httpx.TransportError, httpx.DecodingError) as e:  # a body its encoding cannot undo: malformed
            raise _Retryable(f"{type(e).__name__}: {e}") from None
        if response.status_code in RETRYABLE_STATUS:
            message, _ = _error_message(response)
            raise _Retryable(f"HTTP {response.status_code}: {message}", status=response.status_code,
                             wait_s=_retry_after(response))
        if response.status_code >= 400:
            message, code = _error_message(response)
            raise ProviderError(message, status=response.status_code, code=code)
        try:
            return _parse(response.json())
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise _Retryable(f"malformed response body ({type(e).__name__}: {e})",
                             status=response.status_code) from None


def _env_key(base_url: str) -> str | None:
    """`LLM_API_KEY`; `OPENAI_API_KEY` only when the URL is OpenAI's own API over https."""
    if key := os.environ.get("LLM_API_KEY"):
        return key
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError):
        return None
    if url.scheme == "https" and url.host == OPENAI_HOST:
        return os.environ.get("OPENAI_API_KEY") or None
    return None


class OpenAIChat:
    """`name` behind a chat-completions endpoint. Use `async with`, or pass your own `client`.

    `headers` go with every request (e.g. `{"x-mock-options": "latency=250"}` for the mock).
    """

    def __init__(
        self, name: str, *, client: ModelClient | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.headers = dict(headers or {})
        self._own = client is None
        self.client = client or ModelClient()

    async def __aenter__(self) -> OpenAIChat:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._own:
            await self.client.aclose()

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None,
        max_tokens: int | None,
        cancel: Cancel,
    ) -> Completion:
        return await self.client.complete(
            model=self.name, messages=list(messages), tools=list(tools) if tools else None,
            max_tokens=max_tokens, cancel=cancel, headers=self.headers,
        )

    def count_prompt_tokens(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> int:
        return o200k.prompt_tokens(messages, tools)

    def with_name(self, name: str) -> OpenAIChat:
        """The same endpoint and client under another model name (a sub-agent's, say)."""
        return OpenAIChat(name, client=self.client, headers=self.headers)

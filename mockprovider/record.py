"""The recording proxy: a real model's session, written as a scenario file the mock replays.

    python -m mockprovider record --upstream http://127.0.0.1:8080/v1 --out session.json --port 8001

A client points at the proxy's `/v1`. Each chat completion is forwarded to the upstream
unchanged (body and headers, streaming or not) and its reply is returned unchanged. Every
successful reply is also filed under its conversation (the first user message) and its turn
(the number of assistant messages, as the mock derives it), and the whole recording is rewritten
atomically as a scenario file, so a killed proxy still leaves a valid file. Replayed with
`python -m mockprovider --scenarios session.json`, model `session` answers the same texts and
tool calls at the same turns; usage is recounted with the mock's formula.

One conversation becomes a plain list of turns; several (a client that ran several tasks)
become alternatives keyed by `user_contains`, the longest message first so none hides another.
A retried turn keeps the last reply. The proxy is stateful by nature: it is a tool for making
scripts, not part of the stateless mock.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mockprovider.conditions import first_user
from mockprovider.errors import APIError
from mockprovider.scenario_files import NAME, ScenarioFileError, compile_scenario
from mockprovider.scenarios import conversation

MAX_BODY_BYTES = 16 * 1024 * 1024
UPSTREAM_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""A CPU model can take minutes per reply; a dead upstream should fail fast."""
HOP_BY_HOP = frozenset({
    "host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
    "proxy-authorization", "proxy-connection", "accept-encoding", "content-encoding",
})


@dataclass(kw_only=True)
class Recording:
    """Every reply so far, by conversation and turn; `save()` writes them as one scenario file."""

    upstream: str
    out: Path
    name: str
    description: str | None = None
    replies: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    """First user message → turn → the reply as a scenario-file object."""
    models: dict[str, None] = field(default_factory=dict)
    """Model names the client asked for, in order (a dict as an ordered set)."""

    def add(self, messages: list[Any], model: str, message: Mapping[str, Any]) -> str:
        """File the upstream's `message` as the reply at this conversation's turn; a log line."""
        reply, note = reply_of(message)
        try:
            c = conversation([m for m in messages if isinstance(m, Mapping)])
            user = first_user(c)
            compile_scenario({"name": "check", "turns": [reply]}, source="the upstream's reply")
        except (ScenarioFileError, TypeError) as e:
            # A request the upstream took but a script cannot key on, or a reply it cannot hold.
            return f"not recorded: {e}"
        self.replies.setdefault(user, {})[c.turn] = reply
        self.models[model] = None
        self.save()
        what = "text" if "content" in reply else ", ".join(call["name"] for call in reply["tool_calls"])
        return f"recorded turn {c.turn} ({what}) of {user[:40]!r} in {self.out}{note}"

    def document(self) -> dict[str, Any]:
        # Longest first: a message that contains a shorter one must be tested before it.
        threads = sorted(self.replies.items(), key=lambda item: -len(item[0]))
        count = max((max(turns) + 1 for _, turns in threads), default=0)
        turns: list[Any] = []
        for turn in range(count):
            gap = {"content": f"(turn {turn} was not recorded)"}
            if len(threads) == 1:
                turns.append(threads[0][1].get(turn, gap))
                continue
            turns.append([
                ({"if": {"user_contains": user}} if user else {}) | replies[turn]
                for user, replies in threads
                if turn in replies
            ] or [gap])
        models = ", ".join(self.models) or "no model"
        return {
            "name": self.name,
            "description": self.description
            or f"Recorded from {self.upstream} ({models}): {len(threads)} conversation(s).",
            "turns": turns,
            "after_last": "error",
        }

    def save(self) -> None:
        """Write the file atomically: a temporary file in the same folder, then a rename."""
        text = json.dumps(self.document(), indent=2, ensure_ascii=False) + "\n"
        self.out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.out.parent, prefix=f".{self.out.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def reply_of(message: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """An assistant message as a scenario-file reply, and a note if something could not be kept."""
    calls = message.get("tool_calls") or []
    if not calls:
        return {"content": message.get("content") or ""}, ""
    reply = {"tool_calls": [_call_of(call) for call in calls]}
    # A scenario reply is prose or tool calls; a model that wrote both keeps its calls.
    note = " (its text beside the tool calls was dropped)" if message.get("content") else ""
    return reply, note


def _call_of(call: Any) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, Mapping) else None
    fn = fn if isinstance(fn, Mapping) else {}
    out: dict[str, Any] = {"name": fn.get("name"), "arguments": fn.get("arguments", "")}
    if isinstance(call, Mapping) and call.get("id"):
        out["id"] = call["id"]
    return out


class StreamedReply:
    """Rebuilds the assistant message from an OpenAI SSE stream, fed as the raw bytes arrive."""

    def __init__(self) -> None:
        self._pending = b""
        self._content: list[str] = []
        self._calls: dict[int | str, dict[str, Any]] = {}
        self._seen = False
        self.finished = False
        """A chunk carried a finish_reason: the reply is whole, whatever happens to the stream after."""

    def feed(self, data: bytes) -> None:
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        if len(self._pending) > MAX_BODY_BYTES:
            self._pending = b""  # no SSE line is this long; stop buffering what cannot be one
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        try:
            choice = json.loads(line[5:])["choices"][0]
            delta = choice["delta"]
        except (ValueError, LookupError, TypeError):
            return  # [DONE], the usage chunk, or noise: nothing of the reply
        if not isinstance(delta, Mapping):
            return
        self.finished = self.finished or bool(choice.get("finish_reason"))
        self._seen = True
        if isinstance(delta.get("content"), str):
            self._content.append(delta["content"])
        for part in delta.get("tool_calls") or []:
            if not isinstance(part, Mapping):
                continue
            index = part.get("index", 0)
            index = index if isinstance(index, int) else str(index)  # an odd upstream's: keep it hashable
            slot = self._calls.setdefault(index, {"function": {"name": "", "arguments": ""}})
            if part.get("id"):
                slot["id"] = part["id"]
            fn = part.get("function") if isinstance(part.get("function"), Mapping) else {}
            slot["function"]["name"] += fn.get("name") or ""
            slot["function"]["arguments"] += fn.get("arguments") or ""

    def message(self) -> dict[str, Any] | None:
        """The assistant message the stream carried, or None if it carried none."""
        if not self._seen:
            return None
        # Numbers in numeric order (10 after 9), any odd string index after them.
        calls = [self._calls[index] for index in sorted(self._calls, key=lambda i: (isinstance(i, str), i))]
        return {"role": "assistant", "content": "".join(self._content) or None, "tool_calls": calls}


# --- the proxy --------------------------------------------------------------------------------


def _forwarded(request: Request) -> dict[str, str]:
    headers = {k: v for k, v in request.headers.items() if k not in HOP_BY_HOP}
    headers["accept-encoding"] = "identity"  # bytes pass through as the upstream sent them
    return headers


def _returned(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP}


def _unreachable(upstream: str, e: Exception) -> APIError:
    return APIError(502, f"The upstream {upstream} could not be reached: {type(e).__name__}: {e}",
                    type="server_error", code="upstream_unreachable")


async def _body(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise APIError(413, f"Request body is larger than {MAX_BODY_BYTES} bytes.",
                           code="request_too_large")
        chunks.append(chunk)
    return b"".join(chunks)


async def chat_completions(request: Request) -> Response:
    recording: Recording = request.app.state.recording
    raw = await _body(request)
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        body = None  # the upstream answers it; nothing to record
    messages = body.get("messages") if isinstance(body, dict) else None
    model = str(body.get("model")) if isinstance(body, dict) else ""
    client = httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT)
    upstream = httpx.Request("POST", f"{recording.upstream}/chat/completions", content=raw,
                             headers=_forwarded(request))
    try:
        response = await client.send(upstream, stream=True)
    except httpx.TransportError as e:
        await client.aclose()
        return _unreachable(recording.upstream, e).response()
    record = response.status_code == 200 and isinstance(messages, list)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return StreamingResponse(
            _relay(response, recording, messages if record else None, model),
            status_code=response.status_code, headers=_returned(response),
            background=BackgroundTask(client.aclose),
        )
    try:
        content = await response.aread()
    finally:
        await response.aclose()
        await client.aclose()
    if record:
        _record_body(recording, messages, model, content)
    return Response(content, status_code=response.status_code, headers=_returned(response))


def _record_body(recording: Recording, messages: list[Any], model: str, content: bytes) -> None:
    try:
        message = json.loads(content)["choices"][0]["message"]
        assert isinstance(message, Mapping)
    except (ValueError, LookupError, TypeError, AssertionError):
        _log(f"not recorded: the upstream's reply has no choices[0].message ({content[:80]!r})")
        return
    _log(recording.add(messages, model, message))


async def _relay(
    response: httpx.Response, recording: Recording, messages: list[Any] | None, model: str
) -> AsyncIterator[bytes]:
    reader = StreamedReply()
    ended = False
    try:
        async for chunk in response.aiter_raw():
            reader.feed(chunk)
            yield chunk
        ended = True
    finally:
        # Recorded before the first await here: a client that hangs up once it has read [DONE]
        # (the openai client does) cancels this generator at that await. A reply cut off before
        # its finish_reason is not recorded.
        if messages is not None and (ended or reader.finished):
            _record_stream(recording, messages, model, reader)
        await response.aclose()


def _record_stream(recording: Recording, messages: list[Any], model: str, reader: StreamedReply) -> None:
    message = reader.message()
    _log(recording.add(messages, model, message) if message else "not recorded: the stream held no reply")


async def passthrough(request: Request) -> Response:
    """Anything else under /v1 (e.g. GET /v1/models), forwarded and returned as is, unrecorded."""
    recording: Recording = request.app.state.recording
    url = f"{recording.upstream}/{request.path_params['path']}"
    async with httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT) as client:
        try:
            response = await client.request(request.method, url, params=request.query_params,
                                             content=await _body(request), headers=_forwarded(request))
        except httpx.TransportError as e:
            return _unreachable(recording.upstream, e).response()
    return Response(response.content, status_code=response.status_code, headers=_returned(response))


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok", "recording": str(request.app.state.recording.out)})


def create_recorder(*, upstream: str, out: str | os.PathLike[str], name: str | None = None,
                    description: str | None = None) -> Starlette:
    """The proxy app; `upstream` is an OpenAI-style base URL (ending in /v1)."""
    out = Path(out)
    if out.suffix != ".json":
        raise ValueError(f"the recording is written as JSON: give --out a .json name, not {out.name!r}")
    name = name or out.stem
    if not NAME.fullmatch(name):
        raise ValueError(f"{name!r} cannot be a model name; pass --name with letters, digits, '_', '.', '-'")
    if not upstream.startswith(("http://", "https://")):
        raise ValueError(f"--upstream must be an http(s) base URL (http://HOST:PORT/v1), not {upstream!r}")
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/{path:path}", passthrough, methods=["GET", "POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ],
        exception_handlers={APIError: _api_error},
    )
    app.state.recording = Recording(
        upstream=upstream.rstrip("/"), out=out, name=name, description=description
    )
    return app


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return exc.response()


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mockprovider record", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True, help="the real server's base URL, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--out", required=True, help="the scenario file to write (.json)")
    parser.add_argument("--name", help="the scenario's name (default: the file's stem)")
    parser.add_argument("--description", help="its one-line description in /v1/models")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    try:
        app = create_recorder(
            upstream=args.upstream, out=args.out, name=args.name, description=args.description
        )
    except ValueError as e:
        sys.exit(f"mockprovider record: {e}")
    _log(f"recording proxy at http://{args.host}:{args.port}/v1 -> {args.upstream}; writing {args.out}")
    uvicorn.run(app, host=args.host, port=args.port, access_log=False, log_level="warning")

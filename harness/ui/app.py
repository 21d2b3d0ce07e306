"""`create_app`: the Starlette application behind `harness ui`.

Routes: `/` (runs, `?status=`), `/events` (their live stream), `/runs/{id}` (one run),
`/runs/{id}/events`, `POST /runs/{id}/approve` and `/reject` (form: csrf, call_id, digest,
reason), `/api/runs` and `/api/runs/{id}` (what `harness list --json` and `show --json` print),
`/login` (when a token guards the UI), `/kit/…` (report folders, when given).
Store calls block, so they run in worker threads; pages read through their own store object,
decisions and resumes write through another (`Decider`, `Resumer`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from harness import listing
from harness.codec import StateFileError, to_dict
from harness.state import check_run_id
from harness.store import SqlStore, StoreError
from harness.ui import kit
from harness.ui.decide import Conflict, Decider, Decision, Resumer, call_id_from_form, ui_identity
from harness.ui.layout import notice, page
from harness.ui.live import PARTIAL_HEADER, SCRIPT, Streams, stream
from harness.ui.markup import Markup, html
from harness.ui.run_page import run_body
from harness.ui.runs_page import STATUSES, runs_body
from harness.ui.security import SESSION_COOKIE, Guard, GuardMiddleware, Refused, cookie, read_form
from harness.ui.trace_view import read_trace
from harness.ui.view import RunView


@dataclass(kw_only=True)
class UiSettings:
    reader: SqlStore
    """The store the pages read."""
    decider: Decider
    guard: Guard
    resumer: Resumer | None = None
    """Set with --resume: decided runs continue in this process."""
    kit_reports: Path | None = None
    poll_seconds: float = 1.0
    stream_seconds: float = 300.0
    streams: Streams | None = None
    """The open live streams; made from `poll_seconds` when not given."""

    def __post_init__(self) -> None:
        if self.streams is None:
            self.streams = Streams(self.poll_seconds)


def _page(request: Request, title: str, body: Markup, status: int = 200) -> HTMLResponse:
    if request.headers.get(PARTIAL_HEADER):  # the live script's refresh: the sections, no frame
        return HTMLResponse(body, status_code=status)
    return HTMLResponse(page(title, body, nonce=request.state.nonce, script=SCRIPT), status_code=status)


class ApiJSON(JSONResponse):
    """JSON as `harness list --json` and `show --json` print it: ASCII, so half a surrogate pair a
    provider's reply carried is written as its escape instead of failing to encode."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _error(request: Request, status: int, text: str) -> HTMLResponse:
    return _page(request, "harness ui", html('<h1>{}</h1>{}<p><a href="/">All runs</a></p>',
                                              status, notice("error", text)), status)


class Pages:
    """The route handlers over one `UiSettings`."""

    def __init__(self, ui: UiSettings) -> None:
        self.ui = ui

    async def runs(self, request: Request) -> Response:
        status = request.query_params.get("status") or None
        if status is not None and status not in STATUSES:
            return _error(request, 400, f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        listed = await run_in_threadpool(self.ui.reader.scan_runs, status)
        return _page(request, "runs · harness",
                      runs_body(listed.runs, status, self.ui.reader.label, listed.damaged))

    async def runs_events(self, request: Request) -> Response:
        status = request.query_params.get("status") or None
        if status is not None and status not in STATUSES:
            return PlainTextResponse(f"unknown status {status!r}", status_code=400)
        return self._events(request, ("list", status), lambda: self.ui.reader.change_marker(status))

    def _events(self, request: Request, key: Any, read: Callable[[], Any]) -> Response:
        """The live stream of what `read()` returns (read once per poll for `key`, however many
        pages watch it), or a 429 when this client already holds its share of streams."""
        streams = self.ui.streams

        def body() -> AsyncIterator[str]:
            return stream(lambda: streams.read(key, read), poll_seconds=self.ui.poll_seconds,
                          max_seconds=self.ui.stream_seconds, disconnected=request.is_disconnected)

        return streams.response(request.client.host if request.client else "", body)

    def _view(self, run_id: str, messages: list[Markup]) -> RunView:
        reader = self.ui.reader
        state = reader.load(run_id)
        trace, note = read_trace(state)
        return RunView(state=state, lease=reader.lease(run_id), ledger=reader.ledger(run_id), trace=trace,
                       trace_note=note, resume_here=self.ui.resumer is not None, messages=messages)

    async def _run_response(self, request: Request, run_id: str, messages: list[Markup],
                            status: int = 200) -> Response:
        try:
            check_run_id(run_id)
            view = await run_in_threadpool(self._view, run_id, messages)
        except StateFileError as e:  # a damaged run: said, and left untouched
            return _error(request, 422, str(e))
        except StoreError as e:
            return _error(request, 503, str(e))
        except (FileNotFoundError, ValueError) as e:  # no such run, or not a run id at all
            return _error(request, 404, str(e))
        return _page(request, f"run {run_id} · harness", run_body(view, request.state.csrf), status)

    async def run_page(self, request: Request) -> Response:
        return await self._run_response(request, request.path_params["run_id"], [])

    async def run_events(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            check_run_id(run_id)
        except ValueError as e:
            return PlainTextResponse(str(e), status_code=404)

        def read() -> list[Any]:
            row = self.ui.reader.summary(run_id)
            lease = self.ui.reader.lease(run_id) or {}
            return [row, lease.get("held"), lease.get("epoch")]

        return self._events(request, ("run", run_id), read)

    async def decide(self, request: Request) -> Response:
        run_id, verdict = request.path_params["run_id"], request.path_params["verdict"]
        if verdict not in ("approve", "reject"):
            return _error(request, 404, f"no such action {verdict!r}: approve or reject")
        try:
            check_run_id(run_id)
            form = await read_form(request)
            client = request.client.host if request.client else None
            d = Decision(run_id=run_id, call_id=call_id_from_form(form.get("call_id", "")),
                         digest=form.get("digest", ""),
                         verdict="approved" if verdict == "approve" else "rejected",
                         reason=_typed(form.get("reason", "")), by=ui_identity(client))
            if d.verdict == "rejected" and not d.reason.strip():
                raise Refused(400, "a rejection needs a reason the model can read")
            await run_in_threadpool(self.ui.decider.decide, d)
        except Refused as e:
            return _error(request, e.status, e.message)
        except Conflict as e:
            said = [notice("error", html("Your decision was not applied: {}", e.message))]
            if e.last:
                said.append(notice("notice", html("On record: call {} was {}{} by {}.", e.last.get("call_id"),
                                                  e.last.get("verdict"), _reason(e.last), e.last.get("by"))))
            return await self._run_response(request, run_id, said, 409)
        except FileNotFoundError as e:
            return _error(request, 404, str(e))
        except StateFileError as e:  # subclasses of ValueError: the run or the store, not the request
            return _error(request, 422, str(e))
        except StoreError as e:
            return _error(request, 503, str(e))
        except ValueError as e:
            return _error(request, 400, str(e))
        if self.ui.resumer is not None:
            self.ui.resumer.start(run_id, d.call_id)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    async def api_runs(self, request: Request) -> Response:
        """`harness list --json` as one JSON array."""
        status = request.query_params.get("status") or None
        if status is not None and status not in STATUSES:
            return JSONResponse({"error": f"unknown status {status!r}; known: {', '.join(STATUSES)}"}, 400)
        listed = await run_in_threadpool(self.ui.reader.scan_runs, status)
        # As `harness list --json`: the runs that read; how many rows did not, in a header.
        return ApiJSON([to_dict(r) for r in listed.runs],
                       headers={"x-damaged-runs": str(len(listed.damaged))})

    async def api_run(self, request: Request) -> Response:
        """`harness show RUN --json`: the same versioned object."""
        run_id = request.path_params["run_id"]

        def shown() -> dict[str, Any]:
            return listing.show_json(self.ui.reader.load(check_run_id(run_id)), self.ui.reader)

        try:
            return ApiJSON(await run_in_threadpool(shown))
        except StateFileError as e:
            return JSONResponse({"error": str(e)}, 422)
        except StoreError as e:
            return JSONResponse({"error": str(e)}, 503)
        except (FileNotFoundError, ValueError) as e:
            return JSONResponse({"error": str(e)}, 404)

    async def login(self, request: Request) -> Response:
        guard = self.ui.guard
        if guard.token is None:
            return RedirectResponse("/", status_code=303)
        if request.method == "POST":
            try:
                form = await read_form(request)
            except Refused as e:
                return _error(request, e.status, e.message)
            if guard.token_matches(form.get("token", "")):
                response = RedirectResponse("/", status_code=303)
                session = cookie(SESSION_COOKIE, guard.new_session(), max_age=int(guard.session_seconds))
                response.raw_headers.append((b"set-cookie", session))
                return response
            guard.login_failed(request.client.host if request.client else "")  # counted: see Guard
        wrong = notice("error", "That is not this UI's token.") if request.method == "POST" else Markup("")
        body = html('<h1>Token</h1>{}<form method="post" action="/login"><input type="hidden" name="csrf" '
                    'value="{}"><label>This UI\'s token: <input type="password" name="token" id="token" '
                    'autocomplete="current-password"></label> <button type="submit">Open</button></form>',
                    wrong, request.state.csrf)
        return _page(request, "token · harness", body, 401 if request.method == "POST" else 200)


def create_app(ui: UiSettings) -> Starlette:
    p = Pages(ui)
    routes = [
        Route("/", p.runs), Route("/events", p.runs_events),
        Route("/runs/{run_id}", p.run_page), Route("/runs/{run_id}/events", p.run_events),
        Route("/runs/{run_id}/{verdict}", p.decide, methods=["POST"]),
        Route("/api/runs", p.api_runs), Route("/api/runs/{run_id}", p.api_run),
        Route("/login", p.login, methods=["GET", "POST"]),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        *kit.routes(lambda: ui.kit_reports, _page, _error),
    ]
    app = Starlette(routes=routes, exception_handlers={StoreError: _unavailable})
    app.state.ui = ui
    app.add_middleware(GuardMiddleware, guard=ui.guard)
    return app


async def _unavailable(request: Request, exc: Exception) -> Response:
    """The database cannot be read right now (PostgreSQL down, a locked file): said, not a 500."""
    return _error(request, 503, str(exc))


def _typed(posted: str) -> str:
    """A textarea's text as the person typed it: a browser posts each line break as CR LF (the
    form encoding), while the box's `maxlength` and the CLI count it as one character."""
    return posted.replace("\r\n", "\n")


def _reason(last: dict[str, Any]) -> Markup:
    return html(' with the reason "{}"', last["reason"]) if last.get("reason") else Markup("")

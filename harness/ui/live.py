"""Live updates: a server-sent event stream per page, and the page's few lines of script.

The server looks at the store every `poll_seconds` and sends a `changed` event when what the
page shows has moved. It reads only a marker, never every run: for the list, one row
(`change_marker`: count, latest and sum of the save times); for a run page, the run's own row
and its lease. Streams watching the same thing share one read per poll (`Streams.read`), so
ten open pages cost what one costs. The script then fetches its own page's sections again
(`PARTIAL_HEADER`) from the page's own URL (`data-page`, not the address bar, which holds the
POST's URL when a refused decision drew the page) and swaps those that differ (parsed with
DOMParser: nothing in the fetched HTML runs). A stream ends after `max_seconds`; the browser's
EventSource reconnects by itself. Every (re)connect refreshes once, since the stream compares
only with what it read when it connected.

Each stream holds a connection (a file) for minutes, so one client may hold at most
`MAX_STREAMS_PER_CLIENT` of them and all clients together `Streams.total`; past that a stream
is refused (429) and the connection closed, and the pages themselves keep loading.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

from harness.ui.markup import Markup

MAX_STREAMS_PER_CLIENT = 16
"""Live streams one client address may hold open: a person's tabs, with room to spare."""
MAX_STREAMS = 256
"""Live streams in all, and never more than a quarter of the files this process may open."""
PARTIAL_HEADER = "x-harness-partial"
"""Sent by the page's script: answer with the page's sections only (no head, no style, no script)."""

SCRIPT = Markup("""
(function () {
  var live = document.getElementById('live');
  var source = document.querySelector('[data-live]');
  if (!source || !window.EventSource) { return; }
  // A page answering a POST (a refused decision) sits at the POST's URL: read, and reload, the page's own.
  var here = source.dataset.page || location.href;
  if (source.dataset.page && location.pathname !== source.dataset.page) {
    history.replaceState(null, '', source.dataset.page);
  }
  var busy = false, again = false;
  function say(text) { if (live) { live.textContent = text; } }
  function typing(oldSection, newSection) {
    var reason = oldSection.querySelector('textarea');
    return reason && reason.value && oldSection.dataset.digest === newSection.dataset.digest;
  }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(here, {credentials: 'same-origin', headers: {'X-Harness-Partial': '1'}})
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, 'text/html');
        document.querySelectorAll('[data-swap]').forEach(function (old) {
          var fresh = doc.getElementById(old.id);
          if (!fresh || fresh.innerHTML === old.innerHTML) { return; }
          if (old.id === 'decision' && typing(old, fresh)) { return; }
          old.replaceWith(document.importNode(fresh, true));
        });
        document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
        say('live · updated ' + new Date().toLocaleTimeString());
      })
      .catch(function () { say('live · refresh failed'); })
      .then(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  var events = new EventSource(source.dataset.live);
  // The stream's first reading is taken when it connects: a change between drawing the page and
  // connecting (or during a reconnect) would never be sent, so each (re)connect refreshes once.
  events.addEventListener('open', function () { say('live'); refresh(); });
  events.addEventListener('changed', refresh);
  events.addEventListener('error', function () { say('live · reconnecting'); });
})();
""")


def _file_limit() -> int:
    try:
        import resource
    except ImportError:  # not on this platform: assume the usual default
        return 1024
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft > 0 else 1024


class Streams:
    """The live streams open now (a cap per client and in all), and the reads they share."""

    def __init__(self, poll_seconds: float, *, per_client: int = MAX_STREAMS_PER_CLIENT,
                 total: int | None = None) -> None:
        self.poll_seconds, self.per_client = poll_seconds, per_client
        self.total = total if total is not None else max(per_client, min(MAX_STREAMS, _file_limit() // 4))
        self.open: Counter[str] = Counter()
        self._last: dict[Hashable, tuple[float, Any]] = {}
        self._locks: dict[Hashable, asyncio.Lock] = {}

    def response(self, client: str, body: Callable[[], AsyncIterator[str]]) -> StreamingResponse:
        """The stream `body()` makes, holding one of `client`'s places until it ends; or a 429."""
        if self.open[client] >= self.per_client or sum(self.open.values()) >= self.total:
            why = (f"too many open live streams from this address ({self.per_client})"
                   if self.open[client] >= self.per_client else f"too many open live streams ({self.total})")
            return PlainTextResponse(f"{why}: close some of this UI's pages; they stay usable without it",
                                     status_code=429, headers={"retry-after": "30", "connection": "close"})
        self.open[client] += 1
        return _Held(body(), lambda: self._release(client))

    def _release(self, client: str) -> None:
        self.open[client] -= 1
        if self.open[client] <= 0:
            del self.open[client]

    async def read(self, key: Hashable, read: Callable[[], Any]) -> Any:
        """`read()` (blocking, run in a thread) at most once per poll for `key`, whichever stream asks."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            now = time.monotonic()
            taken = self._last.get(key)
            if taken is not None and now - taken[0] < 0.9 * self.poll_seconds:
                return taken[1]
            value = await _read(read)
            self._last[key] = (time.monotonic(), value)
        for old in [k for k, (t, _) in self._last.items() if now - t > 10 * self.poll_seconds]:
            self._last.pop(old, None)
            self._locks.pop(old, None)
        return value


class _Held(StreamingResponse):
    """A stream that gives its place back when it ends, however it ends (finished, or the
    client gone and the response cancelled)."""

    def __init__(self, body: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(body, media_type="text/event-stream", headers={"x-accel-buffering": "no"})
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


async def _read(read: Callable[[], Any]) -> Any:
    try:
        return await run_in_threadpool(read)
    except ValueError as e:  # StoreError, StateFileError: the page shows it; the stream waits it out
        return f"unreadable: {e}"


async def stream(read: Callable[[], Awaitable[Any]], *, poll_seconds: float, max_seconds: float,
                 disconnected: Callable[[], Any]) -> AsyncIterator[str]:
    """SSE text: `changed` whenever `read()` returns something new."""
    yield f"retry: {int(max(poll_seconds, 0.5) * 1000)}\n\n"
    last, waited = await read(), 0.0
    while waited < max_seconds:
        await asyncio.sleep(poll_seconds)
        waited += poll_seconds
        if await disconnected():
            return
        now = await read()
        if now != last:
            last = now
            yield f"event: changed\ndata: {json.dumps(now, default=str)}\n\n"
        else:
            yield ": idle\n\n"

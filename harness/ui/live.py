"""Live updates: a server-sent event stream per page, and the page's few lines of script.

The server polls the store (in a worker thread) every `poll_seconds` and sends a `changed`
event when what the page shows has moved: for the list, any run's status, turns, cost or
waiting call; for a run page, the run's row or its lease. The script then fetches its own
page's sections again (`PARTIAL_HEADER`) from the page's own URL (`data-page`, not the
address bar, which holds the POST's URL when a refused decision drew the page) and swaps
those that differ (parsed with DOMParser: nothing in the fetched HTML runs). A stream ends
after `max_seconds`; the browser's EventSource reconnects by itself. Every (re)connect refreshes
once, since the stream compares only with what it read when it connected.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from harness.ui.markup import Markup

MAX_STREAMS_PER_CLIENT = 16
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


async def _read(read: Callable[[], Any]) -> Any:
    try:
        return await run_in_threadpool(read)
    except ValueError as e:  # StoreError, StateFileError: the page shows it; the stream waits it out
        return f"unreadable: {e}"


async def stream(read: Callable[[], Any], *, poll_seconds: float, max_seconds: float,
                 disconnected: Callable[[], Any]) -> AsyncIterator[str]:
    """SSE text: `changed` whenever `read()` (blocking, run in a thread) returns something new."""
    yield f"retry: {int(max(poll_seconds, 0.5) * 1000)}\n\n"
    last, waited = await _read(read), 0.0
    while waited < max_seconds:
        await asyncio.sleep(poll_seconds)
        waited += poll_seconds
        if await disconnected():
            return
        now = await _read(read)
        if now != last:
            last = now
            yield f"event: changed\ndata: {json.dumps(now, default=str)}\n\n"
        else:
            yield ": idle\n\n"

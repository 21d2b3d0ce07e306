"""A person's decision from the browser: the CLI's compare-and-set, plus the page's digest.

The path is the one `harness approve` / `harness reject` take: claim the run's lease, load it,
`approve()` / `reject()` (which refuse a call that already has a decision: `DecisionLost`),
record `meta["last_decision"]` in the CLI's shape, save, release. The page adds one check
before that: the call's digest (`args_digest`, the value an approval is bound to) as it was
when the page was drawn must still be the call's digest now, so nobody approves arguments
they did not see.

Two clicks at once: decisions on one run are serialised in this process (a lock per run),
and across processes by the lease (a claim held by someone else is retried for a moment,
since a decision takes milliseconds); whoever comes second finds the call decided and is
told who decided it and what (`Conflict.last`).

After a decision the run is left for whichever worker resumes it (`harness resume RUN`),
unless the UI was started with `--resume`: then `Resumer` continues it in this process, in a
thread, under its own claim, through the CLI's own driver. The winner of a race resumes: its
thread waits out a loser that holds the lease for a moment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from harness.approvals import DecisionLost, decide
from harness.listing import safe
from harness.state import Approval, RunState, args_digest, pending
from harness.store import Fenced, LedgerConflict, RunOwned, SqlStore
from harness.wiring import drive

Verdict = Literal["approved", "rejected"]


class Conflict(Exception):
    """The decision was not applied: someone decided first, the call changed, or the run is
    busy. `last` is the decision on record for this call, when there is one."""

    def __init__(self, message: str, last: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message, self.last = message, last


@dataclass(frozen=True, kw_only=True)
class Decision:
    run_id: str
    call_id: str
    verdict: Verdict
    digest: str
    """`args_digest` of the call as the page showed it."""
    reason: str = ""
    by: str
    """Who decided, as recorded in the run and shown to whoever comes second."""


def form_call_id(call_id: str) -> str:
    """The call id as the form carries it: JSON string escapes, ASCII only. A provider's id may
    hold characters that no HTML attribute and form post bring back unchanged (NUL, a lone CR,
    line breaks a browser rewrites); escaped, every id returns exactly, and a plain one as is."""
    return json.dumps(call_id)[1:-1]


def call_id_from_form(value: str) -> str:
    """`form_call_id` undone; `ValueError` for a value no page of ours sent."""
    try:
        call_id = json.loads(f'"{value}"')
    except ValueError:
        raise ValueError(f"the form's call_id {value[:100]!r} is not one this UI wrote") from None
    return call_id


def call_digest(call: dict[str, Any]) -> str:
    return args_digest(call["function"]["name"], call["function"]["arguments"])


def last_decision_on(state: RunState, call_id: str) -> dict[str, Any] | None:
    """The recorded decision on `call_id` (verdict, by, at, and the reason of a rejection)."""
    last = state.meta.get("last_decision")
    if not isinstance(last, dict) or last.get("call_id") != call_id:
        return None
    reasons = [r.reason for r in state.rejections if r.call_id == call_id]
    return {**last, "reason": reasons[-1]} if reasons and last.get("verdict") == "rejected" else dict(last)


class Decider:
    """Applies decisions to runs of one store (its own store object, apart from the pages')."""

    def __init__(self, store: SqlStore, *, wait_seconds: float = 3.0) -> None:
        self.store, self.wait_seconds = store, wait_seconds
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, run_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(run_id, threading.Lock())

    def decide(self, d: Decision) -> dict[str, Any]:
        """Apply `d`; the decision as recorded. `Conflict` (nothing changed) when it lost."""
        with self._lock(d.run_id):
            deadline = time.monotonic() + self.wait_seconds
            while True:
                try:
                    with self.store.claim(d.run_id):
                        return self._apply(d)
                except RunOwned as e:
                    if time.monotonic() >= deadline:
                        raise Conflict(str(e), self._last(d)) from None
                    time.sleep(0.05)
                except (Fenced, LedgerConflict) as e:
                    raise Conflict(str(e), self._last(d)) from None

    def _last(self, d: Decision) -> dict[str, Any] | None:
        try:
            return last_decision_on(self.store.load(d.run_id), d.call_id)
        except Exception:  # noqa: BLE001 - only context for the refusal; the refusal stands
            return None

    def _apply(self, d: Decision) -> dict[str, Any]:
        state = self.store.load(d.run_id)
        calls = {c["id"]: c for c in pending(state)}
        if d.call_id in calls and call_digest(calls[d.call_id]) != d.digest:
            raise Conflict(f"call {d.call_id!r} of run {d.run_id} has changed since this page was drawn "
                           "(its arguments' digest differs); nothing was decided: review the call again")
        try:
            decide(state, d.verdict, d.call_id, by=d.by, reason=d.reason)
        except DecisionLost as e:
            raise Conflict(str(e), last_decision_on(state, d.call_id)) from None
        self.store.save(state)
        return last_decision_on(state, d.call_id) or state.meta["last_decision"]


def ui_identity(client: str | None) -> str:
    """How a decision made here is signed: this process, and the browser's address."""
    return f"harness ui (process {os.getpid()} on {socket.gethostname()}, browser at {client or 'unknown'})"


class Resumer:
    """Continues decided runs in this process (`harness ui --resume`), one thread per run.

    The run's lease may be held for a moment when the thread starts: by a decision that lost
    (another UI, or the CLI, checking the call it came too late for) or by a worker. The thread
    waits for the lease up to `wait_seconds` (default: one lease period, after which a dead
    holder's claim has lapsed), then continues the run if it is still stopped at the decided call,
    and leaves it alone if someone else continued it meanwhile."""

    def __init__(self, store: SqlStore, *, state_dir: os.PathLike[str], base_url: str | None,
                 log: Callable[[str], None] | None = None, wait_seconds: float | None = None) -> None:
        self.store = store
        self.args = argparse.Namespace(state_dir=state_dir, base_url=base_url)
        self.threads: dict[str, threading.Thread] = {}
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.wait_seconds = store.lease_seconds if wait_seconds is None else wait_seconds

    def start(self, run_id: str, call_id: str | None = None) -> None:
        """Continue `run_id` (given `call_id`: only while the run is still stopped at that call)."""
        thread = threading.Thread(target=self._resume, args=(run_id, call_id), daemon=True,
                                  name=f"resume-{run_id}")
        self.threads[run_id] = thread
        thread.start()

    def join(self, timeout: float | None = None) -> None:
        for thread in list(self.threads.values()):
            thread.join(timeout)

    def _resume(self, run_id: str, call_id: str | None) -> None:
        deadline = time.monotonic() + self.wait_seconds
        while True:
            try:
                with self.store.claim(run_id):
                    state = self.store.load(run_id)
                    stop = state.stop
                    still = call_id is None or (isinstance(stop, Approval) and stop.call_id == call_id)
                    if not (state.resumable and still):
                        self.log(safe(f"harness ui: run {run_id} was continued elsewhere; nothing to do"))
                        return
                    state = asyncio.run(drive(state, self.store, self.args, None))
                self.log(safe(f"harness ui: run {run_id} resumed here and stopped {state.status}"))
                return
            except RunOwned as e:
                if time.monotonic() >= deadline:
                    self.log(safe(f"harness ui: run {run_id} left to its owner: {e}"))
                    return
                time.sleep(0.05)
            except Exception as e:  # noqa: BLE001 - a thread has no caller: say what happened
                self.log(safe(f"harness ui: resuming run {run_id} failed: {type(e).__name__}: {e}"))
                return

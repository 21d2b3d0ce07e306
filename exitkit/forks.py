"""A process that has imported an adapter once and forks a fresh copy of itself for every run.

A framework can take seconds to import; a card runs a few dozen processes per adapter. The fork
server (`python -m exitkit.child forks MODULE:ADAPTER`) imports the adapter's module, then, for
each request the kit writes on its standard input, forks: the copy starts a session of its own,
takes the request's files as its standard output and error and the request's environment, and
runs `exitkit.child` as a new process would. Nothing has run in the server, so the copy holds
no state a run could leave; it is killed, signalled and waited for like any other run's process.

It serves only while it has one thread: forking a process that runs others copies their locks
but not their work, so a framework that starts a thread as it is imported gets a new process
per run instead (`ForkServer.start` returns None).

Protocol, one JSON object per line. Server to kit: `{"ready": true}`, or `{"refused": why}` and
exit; then `{"pid": N}` per request and `{"exit": N, "code": C}` when that copy ends. Kit to
server: `{"argv": [...], "env": {...}, "out": PATH, "err": PATH}`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class _Lines:
    """Lines read from a file descriptor, waiting at most so long for each."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer = fd, b""

    def next(self, timeout: float) -> dict[str, Any] | None:
        end = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise EOFError("the fork server ended")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)


@dataclass
class ForkServer:
    proc: subprocess.Popen[bytes]
    lines: _Lines
    exits: dict[int, int] = field(default_factory=dict)

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str], timeout_s: float) -> ForkServer | str | None:
        """A server ready to fork; the load error's text when the adapter does not load there; None
        when it cannot serve (a thread at import)."""
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        assert proc.stdout is not None
        server = cls(proc=proc, lines=_Lines(proc.stdout.fileno()))
        try:
            hello = server.lines.next(timeout_s)
        except (EOFError, ValueError):
            hello = None
        if hello is not None and hello.get("ready"):
            return server
        server.close()
        if hello is not None and "cannot load" in hello:
            return str(hello["cannot load"])
        return None

    def fork(self, argv: list[str], env: dict[str, str], out: str, err: str) -> int:
        assert self.proc.stdin is not None
        request = json.dumps({"argv": argv, "env": env, "out": out, "err": err}).encode() + b"\n"
        try:
            self.proc.stdin.write(request)
            self.proc.stdin.flush()
        except BrokenPipeError as e:
            raise EOFError("the fork server ended") from e
        while True:
            message = self.lines.next(60.0)
            if message is None:
                raise EOFError("the fork server did not answer")
            if "pid" in message:
                return int(message["pid"])
            self.exits[message["exit"]] = message["code"]

    def wait(self, pid: int, timeout: float) -> int | None:
        """The exit status of the copy `pid`, or None if it still runs after `timeout`."""
        end = time.monotonic() + timeout
        while pid not in self.exits:
            message = self.lines.next(max(end - time.monotonic(), 0))
            if message is None:
                return None
            self.exits[message["exit"]] = message["code"]
        return self.exits.pop(pid)

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a server that died leaves a broken pipe
                    pipe.close()


def serve(loaded: Callable[[], str | None], run: Callable[[list[str]], int]) -> int:
    """The server's side: `loaded()` imports the adapter (its error's text, or None); `run(argv)`
    is what each copy does, as `python -m exitkit.child ARGV...` would."""
    out = sys.stdout.buffer

    def say(message: dict[str, Any]) -> None:
        out.write(json.dumps(message).encode() + b"\n")
        out.flush()

    if (why := loaded()) is not None:
        say({"cannot load": why})
        return 0
    if threading.active_count() > 1:
        say({"refused": f"{threading.active_count()} threads after import"})
        return 0
    say({"ready": True})
    lines, children = _Lines(sys.stdin.fileno()), set()
    while True:
        try:
            request = lines.next(0.01)
        except EOFError:
            return 0
        if request is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            if (pid := os.fork()) == 0:
                os._exit(_copy(request, run))
            children.add(pid)
            say({"pid": pid})
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                say({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _copy(request: dict[str, Any], run: Callable[[list[str]], int]) -> int:
    os.setsid()
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["out"], os.O_WRONLY | os.O_CREAT),
                            (2, request["err"], os.O_WRONLY | os.O_CREAT)):
        if flags & os.O_CREAT:  # a symlink an earlier run left at that name: removed, not written through
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            flags |= os.O_EXCL
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    # New stream objects: the server's may hold a buffer or a lock from before the fork.
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False, buffering=1)
    sys.stderr = open(2, "w", closefd=False, buffering=1)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [sys.argv[0], *request["argv"]]
    try:
        return run(request["argv"])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()

"""`python -m mockprovider record ...` and its Python twin, `with record(upstream, out) as proxy`."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from mockprovider.journal import Journal
from mockprovider.recorder.proxy import Mode, Recorder, proxy_app
from mockprovider.recorder.recording import Recording, RecordingError, check_name, check_out
from mockprovider.recorder.upstream import Upstream
from mockprovider.server import serve_in_thread


def create_recorder(
    *, upstream: str | None, out: str | os.PathLike[str], name: str | None = None,
    description: str | None = None, overwrite: bool = False, append: bool = False, strict: bool = False,
    proxy_on_miss: bool = False, journal: Journal | None = None,
) -> Starlette:
    """The proxy app; `upstream` is an OpenAI-style base URL (ending in /v1), None only for a
    strict replay, which forwards nothing; `journal` keeps every request it receives. Every
    problem with the arguments is a `ValueError` here, before anything is served or written."""
    out = Path(out)
    if overwrite and append:
        raise RecordingError("--overwrite and --append contradict each other; choose one")
    if strict and proxy_on_miss:
        raise RecordingError("--strict forwards nothing and --proxy-on-miss forwards misses; choose one")
    if upstream is None and not strict:
        raise RecordingError("an upstream URL is needed to record; only a strict replay goes without")
    target = Upstream.parse(upstream) if upstream is not None else Upstream.nowhere()
    reads = strict or append or (proxy_on_miss and not overwrite)
    exists = check_out(out, must_exist=strict, may_exist=overwrite or reads)
    recording = Recording(upstream=target.shown, out=out, name=check_name(name or out.stem),
                          description=description)
    if exists:
        if reads:
            recording.load()
            given = recording.given_name
            if name is None and given is not None:  # the file's own name, as a hand edit left it
                recording.name = check_name(given)
        else:
            recording.take_over()
    mode: Mode = "strict" if strict else "proxy-on-miss" if proxy_on_miss else "record"
    return proxy_app(Recorder(upstream=target, recording=recording, mode=mode, journal=journal))


RELAY = {"server_header": False, "date_header": False}
"""The upstream's Date and Server headers reach the client, so uvicorn adds none of its own."""


@dataclass(frozen=True, kw_only=True)
class Proxy:
    """A running recorder, from `record()`."""

    base_url: str
    """`http://127.0.0.1:PORT/v1`: for the openai client."""
    root_url: str
    """`http://127.0.0.1:PORT`: for the anthropic client, which adds `/v1` itself."""
    out: Path
    recorder: Recorder

    @property
    def log(self) -> list[str]:
        """The proxy's log lines so far (also written to stderr), oldest first."""
        return list(self.recorder.lines)


@contextmanager
def record(
    upstream: str, out: str | os.PathLike[str], *, name: str | None = None, description: str | None = None,
    overwrite: bool = False, append: bool = False, strict: bool = False, proxy_on_miss: bool = False,
) -> Iterator[Proxy]:
    """A recorder on an ephemeral loopback port for the `with` block; the file is complete after
    each reply, so it can be read inside the block or after it."""
    app = create_recorder(upstream=upstream, out=out, name=name, description=description, overwrite=overwrite,
                          append=append, strict=strict, proxy_on_miss=proxy_on_miss)
    with serve_in_thread(app, uvicorn_options=RELAY) as base_url:
        yield Proxy(base_url=base_url, root_url=base_url.removesuffix("/v1"), out=Path(out),
                    recorder=app.state.recorder)


DESCRIPTION = """Record a real model's session as a scenario file the mock replays (docs/recorder.md).

Point a client at this proxy's /v1 (Chat Completions, Responses or Anthropic Messages): each
request goes to --upstream and its reply comes back byte for byte, and every model reply is
filed under its conversation and turn in --out. Replay it with
`python -m mockprovider --scenarios OUT`: model NAME answers the same turns in any format."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mockprovider record", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True,
                        help="the real server's base URL, e.g. http://127.0.0.1:8080/v1 (credentials in it "
                        "are sent to it and shown nowhere)")
    parser.add_argument("--out", required=True, help="the scenario file to write (.json)")
    parser.add_argument("--name", help="the scenario's name (default: the file's stem)")
    parser.add_argument("--description", help="its one-line description in /v1/models")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001, help="0 picks a free port (logged at start-up)")
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    existing.add_argument("--append", action="store_true", help="add to an existing --out's recording")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--strict", action="store_true",
                      help="replay --out only: a request it has no reply for fails (404 not_recorded)")
    mode.add_argument("--proxy-on-miss", action="store_true",
                      help="replay what --out holds, forward and record the rest")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        app = create_recorder(
            upstream=args.upstream, out=args.out, name=args.name, description=args.description,
            overwrite=args.overwrite, append=args.append, strict=args.strict,
            proxy_on_miss=args.proxy_on_miss,
        )
    except ValueError as e:
        sys.exit(f"mockprovider record: {e}")
    recorder: Recorder = app.state.recorder
    # Bound here, so the log names the real port even for --port 0.
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as e:
        sys.exit(f"mockprovider record: cannot listen on {args.host}:{args.port}: {e.strerror}")
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    action = "replaying" if recorder.mode == "strict" else "writing"
    recorder.log(f"recording proxy ({recorder.mode}) at http://{shown}:{port}/v1 "
                 f"-> {recorder.upstream.shown}; "
                 f"{action} {args.out}")
    config = uvicorn.Config(app, access_log=False, log_level="warning", **RELAY)
    uvicorn.Server(config).run(sockets=[sock])

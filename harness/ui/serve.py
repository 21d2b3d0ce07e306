"""`harness ui`: bind, decide who may talk to the server, build the app, serve until Ctrl-C.

Loopback only unless `--host` says otherwise; any other address needs a token, read from
`--token-file` or `$HARNESS_UI_TOKEN` (never from the command line, where `ps` shows it). On
loopback the server answers only loopback host names (no DNS rebinding); a token, when one
is given, is required there too.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from pathlib import Path

import uvicorn

from harness.listing import safe
from harness.store import SqlStore
from harness.ui.app import UiSettings, create_app
from harness.ui.decide import Decider, Resumer
from harness.ui.options import TOKEN_ENV
from harness.ui.security import Guard
from harness.wiring import open_cli_store

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
MIN_TOKEN = 16
MAX_POLL_SECONDS = 3600.0
"""Longer than any page stays open; beyond it (inf) a stream would never send a thing."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(token_file: Path | None) -> str | None:
    """The token from the file, else the environment; `ValueError` when it is too weak to use."""
    if token_file is not None:
        token, source = token_file.read_text(encoding="utf-8").strip(), str(token_file)
    else:
        token, source = (os.environ.get(TOKEN_ENV) or "").strip(), f"${TOKEN_ENV}"
        if not token:
            return None
    if len(token) < MIN_TOKEN or any(c.isspace() for c in token):
        raise ValueError(f"the token in {source} must be at least {MIN_TOKEN} characters without spaces "
                         "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return token


def guard_for(host: str, token: str | None) -> Guard:
    if not is_loopback(host):
        if token is None:
            raise ValueError(f"--host {host} serves beyond this machine: give a token with --token-file FILE "
                             f"or ${TOKEN_ENV} (never on the command line)")
        return Guard(hosts=None, token=token)
    names = LOOPBACK_NAMES | {host.lower(), f"[{host}]" if ":" in host else host}
    return Guard(hosts=frozenset(names), token=token)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    # Listening before the address is printed: a client that connects the moment it reads the
    # line waits in the backlog until uvicorn accepts, instead of being refused.
    sock.listen(128)
    return sock


def main(args: argparse.Namespace, store: SqlStore) -> int:

    host = args.host or "127.0.0.1"
    guard = guard_for(host, read_token(args.token_file))
    if not 0 < args.poll_seconds <= MAX_POLL_SECONDS:  # also refuses nan and inf
        raise ValueError(f"--poll-seconds must be > 0 and at most {MAX_POLL_SECONDS:g}, "
                         f"got {args.poll_seconds}")
    if args.kit_reports is not None and not args.kit_reports.is_dir():
        raise ValueError(f"--kit-reports {args.kit_reports} is not a folder")
    writer = open_cli_store(args, None)
    resumer = (Resumer(writer, state_dir=args.state_dir.absolute(), base_url=args.base_url)
               if args.resume else None)
    ui = UiSettings(reader=store, decider=Decider(writer), guard=guard, resumer=resumer,
                    kit_reports=args.kit_reports.absolute() if args.kit_reports else None,
                    poll_seconds=args.poll_seconds)
    sock = bind(host, args.port)
    port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    print(f"harness ui: http://{shown}:{port}/  (store {safe(store.label)}; "
          f"{'resumes decided runs here' if resumer else 'decided runs are left to a worker'}"
          f"{'; token required' if guard.token else ''})", flush=True)
    config = uvicorn.Config(create_app(ui), log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn shuts down gracefully on Ctrl-C, then raises it again for the caller
    finally:
        sock.close()
        if resumer is not None:
            resumer.join(timeout=10)
        writer.close()
    print("harness ui: stopped", file=sys.stderr, flush=True)
    return 0

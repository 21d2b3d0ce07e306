"""`python -m mockprovider --port 8000`: serve the scripted provider with uvicorn."""

from __future__ import annotations

import argparse
import logging
import os

import uvicorn

from mockprovider.app import create_app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mockprovider", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("MOCK_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("MOCK_PORT", "8000")))
    parser.add_argument(
        "--latency-ms", type=float, default=float(os.environ.get("MOCK_LATENCY_MS", "0")),
        help="server-wide time to first byte (a request's own latency= option overrides it)",
    )
    parser.add_argument(
        "--api-key", default=os.environ.get("MOCK_API_KEY"),
        help="require 'Authorization: Bearer KEY' on /v1/* (default: $MOCK_API_KEY); a key given "
        "here is visible to every local user in `ps`: prefer MOCK_API_KEY or --api-key-file",
    )
    parser.add_argument(
        "--api-key-file", type=argparse.FileType("r", encoding="utf-8"), metavar="PATH",
        help="read the required key from PATH (its first line)",
    )
    parser.add_argument("--max-body-bytes", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    # auto: uvloop and httptools (installed with the mock; `make bench` measures them against
    # the pure-Python asyncio and h11, results/bench.md), else the pure-Python pair.
    parser.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto")
    parser.add_argument("--http", choices=("auto", "h11", "httptools"), default="auto")
    args = parser.parse_args(argv)
    if args.api_key_file:
        with args.api_key_file as f:
            args.api_key = f.readline().strip()
        if not args.api_key:
            parser.error(f"--api-key-file {args.api_key_file.name}: the first line holds no key")

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    if args.workers > 1:
        # Workers are separate processes, so they need an import string, not an app object;
        # the server is stateless, so any worker can answer any turn of any run.
        os.environ.update(
            MOCK_LATENCY_MS=str(args.latency_ms), MOCK_MAX_BODY_BYTES=str(args.max_body_bytes),
            **({"MOCK_API_KEY": args.api_key} if args.api_key else {}),
        )
        uvicorn.run("mockprovider.app:app_from_env", factory=True, host=args.host, port=args.port,
                    workers=args.workers, access_log=False, loop=args.loop, http=args.http)
        return
    app = create_app(
        latency_ms=args.latency_ms, api_key=args.api_key, max_body_bytes=args.max_body_bytes
    )
    uvicorn.run(app, host=args.host, port=args.port, access_log=False, loop=args.loop, http=args.http)


if __name__ == "__main__":
    main()

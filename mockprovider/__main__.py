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
        help="require 'Authorization: Bearer KEY' on /v1/*",
    )
    parser.add_argument("--max-body-bytes", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    if args.workers > 1:
        # Workers are separate processes, so they need an import string, not an app object;
        # the server is stateless, so any worker can answer any turn of any run.
        os.environ.update(
            MOCK_LATENCY_MS=str(args.latency_ms), MOCK_MAX_BODY_BYTES=str(args.max_body_bytes),
            **({"MOCK_API_KEY": args.api_key} if args.api_key else {}),
        )
        uvicorn.run("mockprovider.app:app_from_env", factory=True, host=args.host, port=args.port,
                    workers=args.workers, access_log=False)
        return
    app = create_app(
        latency_ms=args.latency_ms, api_key=args.api_key, max_body_bytes=args.max_body_bytes
    )
    uvicorn.run(app, host=args.host, port=args.port, access_log=False)


if __name__ == "__main__":
    main()

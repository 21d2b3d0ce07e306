"""`python -m mockprovider --port 8000`: serve the scripted provider with uvicorn.

`python -m mockprovider record --upstream URL --out FILE` runs the recording proxy instead
(`record --help`); `python -m mockprovider mcp --scenarios FILE` serves the scenario files' MCP
tools over stdio (`mcp --help`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import uvicorn

from mockprovider.app import create_app
from mockprovider.journal import MAX_CAPACITY
from mockprovider.mcp.ledger import LedgerError
from mockprovider.protocol import http_protocol
from mockprovider.replies.faults import LOG_LINES, print_log_lines
from mockprovider.scripts.files import ScenarioFileError, paths_from_env


def _capacity(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= MAX_CAPACITY:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to {MAX_CAPACITY}, got {text!r}")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mockprovider", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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
    parser.add_argument(
        "--scenarios", action="append", default=[], metavar="PATH",
        help="a scenario file (.json/.toml) or a folder of them, served beside the built-ins; "
        "repeatable, and added to those in MOCK_SCENARIOS (colon-separated)",
    )
    parser.add_argument(
        "--journal", type=_capacity, default=os.environ.get("MOCK_JOURNAL", "0"), metavar="N",
        help="keep the last N requests of this process and serve them at GET /journal (default: off)",
    )
    parser.add_argument(
        "--mcp-ledger", default=os.environ.get("MOCK_MCP_LEDGER") or None, metavar="DIR",
        help="record every side effect an MCP tool at /mcp runs as a file in DIR (default: $MOCK_MCP_LEDGER)",
    )
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    # auto: uvloop (the `fast` extra) when installed, else asyncio; `make bench` measures them
    # (results/bench.md, "Server stacks"). --http auto is the mock's own protocol on httptools
    # (mockprovider/protocol.py); httptools and h11 are uvicorn's.
    parser.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto")
    parser.add_argument("--http", choices=("auto", "h11", "httptools"), default="auto",
                        help="auto: uvicorn's httptools protocol with the mock's leaner request cycle "
                        "(default); httptools, h11: uvicorn's own")
    return parser


def serve(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.api_key_file:
        with args.api_key_file as f:
            args.api_key = f.readline().strip()
        if not args.api_key:
            parser.error(f"--api-key-file {args.api_key_file.name}: the first line holds no key")
    scenario_files = list(dict.fromkeys([*paths_from_env(os.environ.get("MOCK_SCENARIOS")), *args.scenarios]))
    print_log_lines(not args.quiet)
    try:
        # Built before uvicorn starts, so a bad scenario file is one line on stderr and exit 1.
        app = create_app(
            latency_ms=args.latency_ms, api_key=args.api_key, max_body_bytes=args.max_body_bytes,
            scenario_files=scenario_files, journal=args.journal, mcp_ledger=args.mcp_ledger,
        )
    except (ScenarioFileError, LedgerError) as e:
        sys.exit(f"mockprovider: {e}")
    if args.workers > 1:
        # Workers are separate processes, so they need an import string, not an app object;
        # the server is stateless, so any worker can answer any turn of any run.
        os.environ.update(
            MOCK_LATENCY_MS=str(args.latency_ms), MOCK_MAX_BODY_BYTES=str(args.max_body_bytes),
            MOCK_SCENARIOS=os.pathsep.join(scenario_files), MOCK_JOURNAL=str(args.journal),
            **{LOG_LINES: "0" if args.quiet else "1"},
            **({"MOCK_API_KEY": args.api_key} if args.api_key else {}),
            **({"MOCK_MCP_LEDGER": args.mcp_ledger} if args.mcp_ledger else {}),
        )
        uvicorn.run("mockprovider.app:app_from_env", factory=True, host=args.host, port=args.port,
                    workers=args.workers, access_log=False, loop=args.loop, http=http_protocol(args.http))
        return
    uvicorn.run(app, host=args.host, port=args.port, access_log=False, loop=args.loop,
                http=http_protocol(args.http))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["record"]:
        from mockprovider.recorder import main as record

        record(argv[1:])
        return
    if argv[:1] == ["mcp"]:
        if importlib.util.find_spec("mcp") is None:
            sys.exit("mockprovider mcp: the MCP server needs the official `mcp` SDK: "
                     "pip install 'harness-lab[mcp]'")
        from mockprovider.mcp.stdio import main as mcp

        mcp(argv[1:])
        return
    serve(argv)


if __name__ == "__main__":
    main()

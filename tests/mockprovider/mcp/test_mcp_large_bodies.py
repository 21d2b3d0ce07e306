"""A large `tools/call` on `/mcp`: `/healthz` keeps answering while it is parsed and answered."""

from __future__ import annotations

import json

import httpx
import pytest
from mcp_support import TOOLBOX, RawSession, sse_messages
from mock_support import P99_BOUND_S, p99_while

from experiments.lab.servers import mock_server

ITEMS = 100_000


@pytest.mark.slow
def test_healthz_keeps_answering_while_100k_item_tool_arguments_are_served(tmp_path):
    scenarios = tmp_path / "toolbox.json"
    scenarios.write_text(json.dumps(TOOLBOX))
    nested = {"path": "x", "items": [{"a": [i]} for i in range(ITEMS)]}
    keys = {"path": "x", **{f"k{i}": i for i in range(ITEMS)}}
    # The mock in its own process: a probe is timed against the server, never against this process.
    with mock_server("--max-body-bytes", str(32_000_000), "--scenarios", str(scenarios)) as (url, _):
        mcp = url.removesuffix("/v1") + "/mcp"
        with httpx.Client(timeout=600) as client:
            session = RawSession(client, mcp)
        bodies = [json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                              "params": {"name": "read_file", "arguments": arguments}}).encode()
                  for n, arguments in enumerate((nested, keys), start=1)]
        answers: list[object] = []

        def send(client: httpx.Client) -> None:
            for body in bodies:
                answers.append(sse_messages(client.post(mcp, content=body, headers=session.headers()))[-1])

        p99, probes = p99_while(url, send)
    # read_file's script answers neither argument set by a condition: its last step, a tool error.
    assert [a["error"]["message"] for a in answers] == ["the disk is on fire"] * 2
    assert p99 < P99_BOUND_S, f"/healthz p99 {p99 * 1000:.0f} ms over {probes} probes"

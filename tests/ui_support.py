"""Helpers for the UI tests: a real server on a loopback port, runs made by the real CLI, a run
full of hostile strings, and a reader of what a page really contains (tags, attributes, forms)."""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from harness import RunState, SQLiteStore
from harness.cli import main as harness_main
from harness.state import Approval
from harness.store import SqlStore
from harness.ui.app import UiSettings, create_app
from harness.ui.decide import Decider, Resumer
from harness.ui.security import Guard
from harness.ui.serve import LOOPBACK_NAMES
from mockprovider.server import serve_in_thread

FILLER = "x" * 100_000
"""A padded argument: a value long enough to push whatever follows it off any screen."""

HOSTILE = [
    '<script>alert("x")</script>',
    "<img src=x onerror=alert(1)>",
    '" onmouseover="alert(1)" x="',
    "javascript:alert(1)",
    '<a href="javascript:alert(1)">click me</a>',
    "\u202etxt.exe",
    "\u2066isolated\u2069 and \u200bzero-width",
    "</pre></section><script>alert(2)</script>",
    "<svg onload=alert(3)>",
    "<style>body{display:none}</style>",
    "\x1b[31mred\x1b[0m",
    "{{7*7}} ${7*7}",
]
"""Each string a provider, a tool or a file could put in a run; `{origin}` slots are filled
with another origin that must never be contacted."""
HOSTILE_WITH_ORIGIN = [
    '<img src="{origin}/pixel.png">',
    '<iframe src="{origin}/frame"></iframe>',
    '<link rel="stylesheet" href="{origin}/x.css">',
    "<meta http-equiv=refresh content='0;url={origin}/moved'>",
]


def visible(s: str) -> str:
    """`s` as the page shows it: invisible and bidi characters as `\\uXXXX` escapes."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]",
                  lambda m: f"\\u{ord(m.group()):04x}", s)


def hostile_strings(origin: str) -> list[str]:
    return HOSTILE + [s.format(origin=origin) for s in HOSTILE_WITH_ORIGIN]


def tiny_png() -> bytes:
    """A valid 1x1 PNG, built with the standard library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def make_runs(state_dir: Path, mock_url: str, *runs: tuple[str, str]) -> None:
    """Runs started by the real CLI: (run id, scenario) each."""
    for run_id, scenario in runs:
        harness_main(["--state-dir", str(state_dir), "--base-url", mock_url, "run", "--scenario", scenario,
                      "--run-id", run_id])


def one_call(name: str, *calls: dict[str, Any], answer: str = "Done.") -> dict[str, Any]:
    """A scenario file (as a dict) asking each call in turn (`{"name", "arguments"[, "id"]}`), then
    answering."""
    return {"name": name, "turns": [{"tool_calls": [c]} for c in calls] + [{"content": answer}]}


PADDED = one_call("padded", {"name": "delete_file", "arguments": {"filler": FILLER, "path": "access.log"}})
"""A model that pads the call that matters: `filler` comes first, then the file it deletes."""


@contextmanager
def scripted_mock(*scenarios: dict[str, Any]) -> Iterator[str]:
    """A mock serving these scenario files beside the built-ins; yields its /v1 base URL."""
    with serve_in_thread(scenario_files=list(scenarios)) as url:
        yield url


def save_hostile_run(store: SqlStore, run_id: str, strings: list[str]) -> RunState:
    """A run saved through the Python API whose every provider- or tool-controlled field holds
    the hostile strings, stopped waiting for a call whose arguments hold them too."""
    text = "\n".join(strings)
    args = {f"k{i}": s for i, s in enumerate(strings)}
    call = {"id": "c<1>", "type": "function",
            "function": {"name": "delete_file", "arguments": json.dumps(args, ensure_ascii=False)}}
    earlier = {"id": "c0", "type": "function",
               "function": {"name": strings[0], "arguments": json.dumps(args)}}
    state = RunState(run_id=run_id, messages=[
        {"role": "system", "content": text},
        {"role": "user", "content": text},
        {"role": "assistant", "content": text, "tool_calls": [earlier]},
        {"role": "tool", "tool_call_id": "c0", "name": strings[1], "content": text},
        {"role": "assistant", "content": text, "tool_calls": [call]},
    ], turns=2, stop=Approval(call_id="c<1>", tool_name="delete_file", args=args),
        meta={"note": text, "trace": "/nonexistent/" + strings[0]})
    store.save(state)
    return state


@contextmanager
def serve_ui(reader: SqlStore, *, writer: SqlStore | None = None, token: str | None = None,
             resumer: Resumer | None = None, kit_reports: Path | None = None,
             poll_seconds: float = 0.1, decide_wait: float = 3.0) -> Iterator[str]:
    """A UI on a real loopback socket; yields its base URL (`http://127.0.0.1:PORT`)."""
    guard = Guard(hosts=LOOPBACK_NAMES, token=token)
    decider = Decider(writer or reader, wait_seconds=decide_wait)
    ui = UiSettings(reader=reader, decider=decider, guard=guard, resumer=resumer, kit_reports=kit_reports,
                    poll_seconds=poll_seconds, stream_seconds=30)
    with serve_in_thread(create_app(ui)) as url:
        yield url.removesuffix("/v1")


def sqlite_pair(path: Path) -> tuple[SQLiteStore, SQLiteStore]:
    """Two store objects on one database: the pages' reader and the decisions' writer."""
    return SQLiteStore(path), SQLiteStore(path)


class PageParts(HTMLParser):
    """What a browser would build from a page: its elements, their attributes, inline scripts."""

    VOID = frozenset({"input", "br", "meta", "img", "link", "hr", "col", "wbr"})

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[dict[str, str | None]] = []
        self.text: list[str] = []
        self.by_id: dict[str, list[str]] = {}
        """The text inside each element that has an id (its descendants' text included)."""
        self.by_arg: dict[str, list[str]] = {}
        """Likewise for each element with a `data-arg` (one argument of the waiting call)."""
        self._open: list[tuple[str, list[list[str]]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag == "script":
            self.scripts.append(found)
        if tag in self.VOID:
            return
        sinks = []
        if found.get("id"):
            sinks.append(self.by_id.setdefault(found["id"] or "", []))
        if found.get("data-arg") is not None:
            sinks.append(self.by_arg.setdefault(found["data-arg"] or "", []))
        self._open.append((tag, sinks))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == tag:
                del self._open[i:]
                return

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _, sinks in self._open:
            for sink in sinks:
                sink.append(data)

    def text_of(self, element_id: str) -> str:
        """The text of the element with this id; KeyError when the page has none."""
        return "".join(self.by_id[element_id])

    def attrs(self, **wanted: str) -> list[dict[str, str | None]]:
        """The attributes of every element whose attributes include `wanted` (`data_arg=` for `data-arg`)."""
        want = {k.replace("_", "-"): v for k, v in wanted.items()}
        return [a for _, a in self.tags if all(a.get(k) == v for k, v in want.items())]

    def forms(self) -> dict[str, dict[str, str]]:
        """Form id -> its hidden fields."""
        found: dict[str, dict[str, str]] = {}
        current = None
        for tag, attrs in self.tags:
            if tag == "form":
                current = found.setdefault(attrs.get("id") or "", {})
            elif tag == "input" and current is not None and attrs.get("type") == "hidden":
                current[attrs["name"] or ""] = attrs.get("value") or ""
        return found

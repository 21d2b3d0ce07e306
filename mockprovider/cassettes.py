"""A cassette per test: the recording proxy in front of a real model, in the record modes of
vcrpy and pytest-recording, for the `mock_llm` fixture (`@pytest.mark.mock_llm(record=...)`).

A cassette is a scenario file the recorder writes (docs/recorder.md), kept beside the test as
`cassettes/<module>/<test>.json`, so a test's model replies live next to the test and replay
through any wire format. The modes, as vcrpy names them:

- `none` (the default): replay only; a request the cassette has no reply for fails the test,
  naming the request; nothing reaches any network, so CI runs in this mode.
- `once`: record a cassette that does not exist yet; replay one that does, as `none`.
- `new_episodes`: replay what the cassette holds, record what it does not.
- `all`: record everything again, replacing the cassette.

Recording needs an upstream: the marker's `upstream=` or `MOCK_LLM_UPSTREAM`, an OpenAI-style
base URL (Gemini's and Ollama's requests go to its root). Credentials in it, or in the client's
headers, are never written: the cassette holds only what the model said, keyed by the
conversation's first user message and turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from starlette.applications import Starlette

from mockprovider.journal import Journal
from mockprovider.recorder import create_recorder

RecordMode = Literal["none", "once", "new_episodes", "all"]
RECORD_MODES: tuple[str, ...] = get_args(RecordMode)
UPSTREAM_ENV = "MOCK_LLM_UPSTREAM"
"""Where a recording mode forwards to when the marker names no `upstream=`."""
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True, kw_only=True)
class Cassette:
    """One test's cassette and how the test uses it."""

    path: Path
    mode: RecordMode
    upstream: str | None
    """The URL a recording mode forwards to; None when the test only replays."""

    @property
    def name(self) -> str:
        """The scenario's name in the file (a model name: at most 64 plain characters)."""
        return (_NOT_IN_NAME.sub("_", self.path.stem).lstrip("_.-") or "cassette")[:64]


def cassette_path(test_file: Path, test_name: str) -> Path:
    """`cassettes/<module>/<test>.json` beside the test file (`Class.test` for a method); a
    parametrized test's id is kept, made safe for a file name."""
    return test_file.parent / "cassettes" / test_file.stem / f"{_NOT_IN_NAME.sub('_', test_name)[:150]}.json"


def record_mode(given: object) -> RecordMode:
    """`given` as a record mode; `ValueError` naming the modes otherwise."""
    if given not in RECORD_MODES:
        raise ValueError(f"record mode {given!r} is not one of {', '.join(RECORD_MODES)}")
    return given  # type: ignore[return-value]


def recorder_for(cassette: Cassette, journal: Journal) -> Starlette:
    """The recording proxy for `cassette` in its mode; `ValueError` (one line) when the mode
    cannot run: a replay without a cassette, a recording without an upstream."""
    exists = cassette.path.exists()
    replay_only = cassette.mode == "none" or (cassette.mode == "once" and exists)
    if replay_only and not exists:
        raise ValueError(f"no cassette at {cassette.path} to replay (record mode none): record it once "
                         f"with --llm-record-mode=once and an upstream (the marker's upstream= or "
                         f"{UPSTREAM_ENV})")
    if not replay_only and not cassette.upstream:
        raise ValueError(f"record mode {cassette.mode} needs an upstream to record from: the marker's "
                         f"upstream= or {UPSTREAM_ENV}")
    if not replay_only:
        cassette.path.parent.mkdir(parents=True, exist_ok=True)
    return create_recorder(
        upstream=None if replay_only else cassette.upstream, out=cassette.path, name=cassette.name,
        strict=replay_only, proxy_on_miss=cassette.mode == "new_episodes" and exists,
        overwrite=cassette.mode == "all", journal=journal,
    )

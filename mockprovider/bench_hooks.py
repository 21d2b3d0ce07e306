"""The mock's internals that the lab's benchmarks time (`experiments/bench`), named in one place.

The speed-trick benchmarks time private functions against the plain code each trick replaces,
and patch a few of them to switch a trick off. They reach the mock only through this module:
each part below is checked when it is imported, so a rename inside the mock fails here, loudly,
naming what moved, instead of somewhere deep in a benchmark.
"""

from __future__ import annotations

from types import ModuleType

from mockprovider import app, cycle, metrics, protocol
from mockprovider.apis import chat, steps
from mockprovider.reading import body, memo, request_headers, settings, transcript, validation
from mockprovider.replies import caching, completions, faults, headers, tool_choice
from mockprovider.scripts import options, scenarios
from mockprovider.scripts.options import attempt_of

TIMED: dict[ModuleType, tuple[str, ...]] = {
    chat: ("ChatLane", "ChatRequest", "_MESSAGES", "answer", "body", "chat_request", "check_tools", "render",
           "_max_tokens", "_usage", "remembered_later"),
    steps: ("config_of", "resolve", "scripted_reply", "test_id"),
    metrics: ("Metrics", "RequestSeries", "BUCKETS", "REQUESTS", "REQUESTS_HELP", "SECONDS", "SECONDS_HELP"),
    body: ("APIError", "_admitted", "_check_content_type", "_kept", "_read_body", "_too_large", "missing"),
    caching: ("NO_CACHE", "openai_read", "openai_since"),
    memo: ("MEMORY", "Entry", "Memory", "parse", "_DIGITS", "_LONG", "MIN_CHARS", "WALK"),
    request_headers: ("header", "header_map"),
    transcript: ("EMPTY", "INLINE_CHARS", "Transcript", "conversation", "counted", "prompt_tokens", "read",
                 "read_message", "unanswered", "_read_new", "_short_tokens", "_keep_tools_count", "tools_key",
                 "_TOOLS_COUNTED", "_NULLS"),
    settings: ("CHAT", "check"),
    validation: ("MAX_DEPTH", "check_depth", "flag", "number_in", "parse_json", "refuse_lone_surrogates",
                 "_deeper_than"),
    completions: ("Completion", "complete", "_completion", "_CALLS_COUNTED", "getrandbits"),
    faults: ("delay_or_fault", "log"),
    headers: ("AS_LINES", "JSON_HEAD", "LENGTH_AND_TYPE", "OPTIONS", "adding", "anthropic_path",
              "anthropic_headers", "openai_headers", "json_head", "json_lines", "JSON_TYPE", "openai_limits",
              "start", "STARTED", "REQUEST_ID", "_openai_limits", "getrandbits"),
    tool_choice: ("AUTO", "chat_choice", "check", "constrain"),
    options: ("Options", "attempt_of"),
    cycle: ("BODY_FOLLOWS", "Cycle", "WHOLE"),
    protocol: ("Http11",),
    app: ("MockApp",),
    scenarios: ("SCENARIOS", "Conversation", "_asked", "_reply"),
}
"""Each module the benchmarks use, and the names they read or patch in it."""

_missing = [f"{m.__name__}.{name}" for m, names in TIMED.items() for name in names if not hasattr(m, name)]
if _missing:
    raise ImportError(f"the benchmarks' hooks into the mock moved: {', '.join(_missing)} no longer exist; "
                      "update mockprovider/bench_hooks.py and experiments/bench together")

__all__ = ["app", "attempt_of", "body", "caching", "chat", "completions", "cycle", "faults", "headers",
           "memo", "metrics", "options", "protocol", "request_headers", "scenarios", "settings", "steps",
           "tool_choice", "transcript", "validation"]

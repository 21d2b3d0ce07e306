"""AWS's event-stream framing (`application/vnd.amazon.eventstream`), as Bedrock streams a reply.

A message is a prelude (total length, headers length, both big-endian 32-bit, and the prelude's
CRC32), its headers (a one-byte name length, the name, a one-byte value type, the value), the
payload, and the CRC32 of everything before it. botocore ships only a reader of this framing, so
the writer is here; the CRCs are `zlib.crc32`, and the tests read every frame back with
botocore's own parser. `read` is the reader the recorder uses on a Bedrock upstream's stream.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

_PRELUDE = struct.Struct(">II")
_U32 = struct.Struct(">I")
_STRING = 7
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
"""Value sizes of the header types that carry no length of their own (bool, byte, short, int,
long, timestamp, uuid); 6 (bytes) and 7 (string) carry a two-byte length."""
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The framing's own limit on one message (the SDKs refuse larger ones)."""


class Malformed(ValueError):
    """Bytes that are no event-stream message: a bad length or CRC."""


def _headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += bytes([len(raw_name)]) + raw_name + bytes([_STRING])
        out += struct.pack(">H", len(raw_value)) + raw_value
    return bytes(out)


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed message of string `headers` and `payload`."""
    head = _headers(headers)
    prelude = _PRELUDE.pack(16 + len(head) + len(payload), len(head))
    body = prelude + _U32.pack(zlib.crc32(prelude)) + head + payload
    return body + _U32.pack(zlib.crc32(body))


def event(event_type: str, data: dict[str, Any]) -> bytes:
    """An event of the stream, its JSON payload the event's members."""
    return message({":event-type": event_type, ":content-type": "application/json", ":message-type": "event"},
                   json.dumps(data, separators=(",", ":")).encode())


def exception(exception_type: str, data: dict[str, Any]) -> bytes:
    """An exception the stream ends with (the SDK raises it mid-iteration)."""
    return message({":exception-type": exception_type, ":content-type": "application/json",
                    ":message-type": "exception"}, json.dumps(data, separators=(",", ":")).encode())


def corrupted(frame: bytes) -> bytes:
    """`frame` with its message CRC wrong: what a reader must refuse."""
    return frame[:-4] + _U32.pack(zlib.crc32(frame[:-4]) ^ 0xFFFFFFFF)


def _read_headers(raw: bytes) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    i = 0
    while i < len(raw):
        size = raw[i]
        name = raw[i + 1:i + 1 + size].decode("utf-8", "replace")
        i += 1 + size
        if i >= len(raw):
            raise Malformed("a header ends before its value type")
        kind = raw[i]
        i += 1
        if kind in (6, _STRING):
            (length,) = struct.unpack_from(">H", raw, i)
            value = raw[i + 2:i + 2 + length]
            headers[name] = value.decode("utf-8", "replace") if kind == _STRING else value
            i += 2 + length
        elif kind in _FIXED:
            headers[name] = raw[i:i + _FIXED[kind]]
            i += _FIXED[kind]
        else:
            raise Malformed(f"header {name!r} has an unknown value type {kind}")
    if i != len(raw):
        raise Malformed("the headers overrun their stated length")
    return headers


def read(buffer: bytearray) -> list[tuple[dict[str, Any], bytes]]:
    """The whole messages at the start of `buffer` as (headers, payload), removed from it; a partial
    message stays for the next bytes. `Malformed` for bytes that cannot be a message."""
    out = []
    while len(buffer) >= 12:
        total, head_size = _PRELUDE.unpack_from(buffer)
        if total > MAX_MESSAGE_BYTES or total < 16 + head_size:
            raise Malformed(f"a message states {total} bytes, {head_size} of headers")
        if _U32.unpack_from(buffer, 8)[0] != zlib.crc32(bytes(buffer[:8])):
            raise Malformed("the prelude's CRC does not match")
        if len(buffer) < total:
            break
        frame = bytes(buffer[:total])
        if _U32.unpack_from(frame, total - 4)[0] != zlib.crc32(frame[:-4]):
            raise Malformed("the message's CRC does not match")
        try:
            headers = _read_headers(frame[12:12 + head_size])
        except (IndexError, struct.error) as e:
            raise Malformed(f"the headers are cut short ({e})") from None
        out.append((headers, frame[12 + head_size:-4]))
        del buffer[:total]
    return out

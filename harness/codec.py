"""Saved runs as JSON: encoding, and decoding that checks every field against its type hint.

Validation is derived from the dataclasses in `harness.state`, not restated: a field's type
hint says what it may hold (nested dataclasses, tagged unions, lists, dicts, literals), and
`Annotated` markers add value checks (`NonNegative`, `ChatMessage`). A wrong type or value
anywhere is a `StateFileError` naming the field — on load, not three turns later.

Version 1 files (status, interruption and error as three fields; approvals as bare ids) are
migrated on load.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
from functools import cache
from itertools import accumulate
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from harness import state as st
from harness.state import SCHEMA_VERSION, RunState

SUPPORTED_VERSIONS = (1, SCHEMA_VERSION)

MAX_DEPTH = 256
"""Deepest nesting of arrays and objects a saved run may hold. Deeper text is refused before
it is parsed: Python's parser and every walk over the data recurse, and a run edited to be
100,000 levels deep must be a clear error, not a RecursionError."""
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


class StateFileError(ValueError):
    """A saved run that cannot be loaded: corrupt, foreign, or of an unknown schema version."""


class _Bad(Exception):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"field {path or '(top)'} {problem}")


def to_dict(obj: Any) -> Any:
    """Plain JSON data for `obj`: dataclasses become objects, at any depth."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_dict(v) for v in obj]
    return obj


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _plain(obj: Any) -> Any:
    """What the encoder calls for a value it does not know: a dataclass becomes its fields."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = _field_names(type(obj))
        # A dataclass's __init__ sets its fields in order, so its __dict__ is that object already
        # when it holds nothing else: no copy per value saved.
        own = getattr(obj, "__dict__", None)
        if own is not None and len(own) == len(names):
            return own
        return {name: getattr(obj, name) for name in names}
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


# ASCII-escaped, so a lone surrogate (an undecodable byte from argv, say) round-trips too.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=_plain)
# The C encoder `JSONEncoder.encode` builds on every call, built once: a save encodes each item
# it adds on its own. No circular check (a structure holding itself fails as a RecursionError).
_C_ENCODE = c_make_encoder and c_make_encoder(None, _plain, encode_basestring_ascii, None, ":", ",",
                                              False, False, False)


def dumps(obj: Any) -> str:
    """The JSON of `to_dict(obj)`, written by the C encoder, which asks `_plain` only about the
    dataclasses it meets instead of a Python walk over every value first."""
    if _C_ENCODE is None:
        return _ENCODER.encode(obj)
    return "".join(_C_ENCODE(obj, 0))


def dumps_data(data: Any) -> str:
    """`dumps` of data that is plain JSON already (no dataclasses)."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def to_json(state: RunState) -> str:
    return dumps(state)


def check_depth(text: str | bytes, source: str, *, wrapper: int = 0) -> None:
    """`StateFileError` when `text` nests arrays/objects deeper than `MAX_DEPTH` (not counting
    `wrapper` outer levels that hold the values, such as the list around a run's item rows)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    if len(brackets) <= MAX_DEPTH:
        return
    deepest = max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0) - wrapper
    if deepest > MAX_DEPTH:
        raise StateFileError(
            f"{source} nests {deepest} levels deep; a saved run may nest at most {MAX_DEPTH}; "
            "nothing was changed"
        )


def from_json(text: str | bytes, *, source: str = "run state") -> RunState:
    """Parse a saved run; `StateFileError` naming `source` and the problem otherwise."""
    check_depth(text, source)
    try:
        data = json.loads(text)
    except ValueError as e:
        raise StateFileError(f"{source} is not valid JSON ({e}); the file was left untouched") from None
    return from_data(data, source=source)


def from_data(data: Any, *, source: str = "run state") -> RunState:
    if not isinstance(data, dict) or "run_id" not in data or "schema_version" not in data:
        raise StateFileError(f"{source} is not a harness run (no run_id/schema_version)")
    version = data["schema_version"]
    if type(version) is not int or version not in SUPPORTED_VERSIONS:
        raise StateFileError(
            f"{source} has schema_version {version!r}; this harness supports {list(SUPPORTED_VERSIONS)}"
        )
    required = _V1_KEYS if version == 1 else {f.name for f in dataclasses.fields(RunState)}
    if missing := required - data.keys():
        raise StateFileError(f"{source} is a damaged harness run: missing {sorted(missing)}")
    try:
        if version == 1:
            try:
                data = _migrate_v1(data)
            except (TypeError, AttributeError, KeyError) as e:
                raise _Bad("(version 1)", f"cannot be migrated ({type(e).__name__}: {e})") from None
        state = decode(RunState, data)
        st.check_run_id(state.run_id)
        _check_references(state)
    except (_Bad, ValueError) as e:
        raise StateFileError(f"{source} is a damaged harness run: {e}; the file was left untouched") from None
    return state


def _check_references(state: RunState) -> None:
    """What one field says about another: fields that point into the transcript point at the
    right kind of message, an intent names its own call, a completed run ends with its answer."""
    messages = state.messages
    if not messages:
        raise _Bad("messages", "is empty; a run holds at least its task")
    for sig, index in state.cache.items():
        if not (index < len(messages) and messages[index].get("role") == "tool"):
            raise _Bad(f"cache[{sig!r}]", f"is {index}, which is not the index of a tool message")
    for key, intent in state.intents.items():
        if key != intent.call_id:
            raise _Bad(f"intents[{key!r}]", f"holds the intent of call {intent.call_id!r}")
    if isinstance(state.stop, st.Completed) and messages[-1].get("role") != "assistant":
        raise _Bad("stop", "says completed, but the last message is not the assistant's answer")


# --- decoding by type hint ----------------------------------------------------------------


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls, include_extras=True)


def decode(hint: Any, value: Any, path: str = "") -> Any:
    """`value` (parsed JSON) as an instance of `hint`; `_Bad` naming the path otherwise."""
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *markers = get_args(hint)
        out = decode(inner, value, path)
        for marker in markers:
            if problem := marker.check(out):
                raise _Bad(path, problem)
        return out
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        return _union(hint, value, path)
    if origin is Literal:
        if value not in get_args(hint):
            raise _Bad(path, f"is {value!r}, not one of {list(get_args(hint))}")
        return value
    if origin is list:
        _expect(isinstance(value, list), path, "a list", value)
        (item,) = get_args(hint)
        return [decode(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        _expect(isinstance(value, list | tuple), path, "a list", value)
        item, _ = get_args(hint)  # only tuple[X, ...] is used
        return tuple(decode(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        _expect(isinstance(value, dict), path, "an object", value)
        _, item = get_args(hint)
        return {k: decode(item, v, f"{path}[{k!r}]") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _dataclass(hint, value, path)
    return _scalar(hint, value, path)


def _expect(ok: bool, path: str, what: str, value: Any) -> None:
    if not ok:
        raise _Bad(path, f"is {type(value).__name__}, expected {what}")


def _scalar(hint: Any, value: Any, path: str) -> Any:
    if hint is type(None):
        _expect(value is None, path, "null", value)
    elif hint is bool:
        _expect(isinstance(value, bool), path, "a boolean", value)
    elif hint is int:
        _expect(isinstance(value, int) and not isinstance(value, bool), path, "an integer", value)
    elif hint is float:
        _expect(isinstance(value, int | float) and not isinstance(value, bool), path, "a number", value)
        if not math.isfinite(value):
            raise _Bad(path, f"is {value!r}, expected a finite number")
        return float(value)
    elif hint is str:
        _expect(isinstance(value, str), path, "a string", value)
    else:
        raise TypeError(f"no decoder for {hint!r}")  # a programming error, not a bad file
    return value


def _union(hint: Any, value: Any, path: str) -> Any:
    options = get_args(hint)
    if value is None and type(None) in options:
        return None
    tagged = {_tag(c): c for c in options if dataclasses.is_dataclass(c)}
    if tagged:
        _expect(isinstance(value, dict), path, "an object", value)
        cls = tagged.get(value.get("type"))
        if cls is None:
            raise _Bad(path, f"has type {value.get('type')!r}, expected one of {sorted(tagged)}")
        return _dataclass(cls, value, path)
    (only,) = [o for o in options if o is not type(None)]
    return decode(only, value, path)


def _tag(cls: type) -> str:
    return next(f.default for f in dataclasses.fields(cls) if f.name == "type")


def _dataclass(cls: type, value: Any, path: str) -> Any:
    _expect(isinstance(value, dict), path, f"a {cls.__name__} object", value)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if unknown := value.keys() - fields.keys():
        raise _Bad(path, f"has unknown key(s) {sorted(unknown)}")
    hints = _hints(cls)
    kwargs = {}
    for name, f in fields.items():
        if name in value:
            kwargs[name] = decode(hints[name], value[name], f"{path}.{name}" if path else name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _Bad(path, f"is missing {name!r}")
    return cls(**kwargs)


# --- version 1 --------------------------------------------------------------------------------

_V1_KEYS = {"run_id", "messages", "turns", "prompt_tokens", "completion_tokens", "cost_usd", "status"}


def _migrate_v1(data: dict[str, Any]) -> dict[str, Any]:
    """v1 → v2: one stop value from status/interruption/error; approvals bound to their call."""
    data = dict(data)
    status, stop = data.pop("status", "running"), data.pop("interruption", None)
    error = data.pop("error", None)
    simple = {"completed": {"type": "completed"}, "max_turns_exceeded": {"type": "max_turns"},
              "budget_exceeded": {"type": "max_budget"}, "running": None}
    if status == "failed":
        data["stop"] = {"type": "failed", "reason": str(error or "failed")}
    elif status == "interrupted":
        data["stop"] = stop
    elif status in simple:
        data["stop"] = simple[status]
    else:
        raise _Bad("status", f"is {status!r}")
    calls = {c.get("id"): c for m in data.get("messages") or () if isinstance(m, dict)
             for c in m.get("tool_calls") or () if isinstance(c, dict)}
    approved = []
    for call_id in data.get("approved") or ():
        fn = (calls.get(call_id) or {}).get("function") or {}
        if isinstance(fn.get("name"), str) and isinstance(fn.get("arguments"), str):
            approved.append({"call_id": call_id, "tool_name": fn["name"],
                             "digest": st.args_digest(fn["name"], fn["arguments"])})
    data["approved"] = approved
    data["usage"] = {"prompt_tokens": data.pop("prompt_tokens", 0),
                     "completion_tokens": data.pop("completion_tokens", 0)}
    data["schema_version"] = SCHEMA_VERSION
    return data

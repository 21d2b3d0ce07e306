"""Per-request options: latency and stateless fault injection.

Every option is reachable with nothing but `base_url` and `model`, so any OpenAI client can
select it. An options string is `key=value` items joined by `+`, given in any of:

- a suffix on the model name:        model="plan+latency=250+fault=429@1x2"
- a path prefix in the base URL:     base_url="http://127.0.0.1:8000/o/latency=250/v1"
- a header:                          x-mock-options: latency=250+fault=500

Later sources override earlier ones (server flags < scenario file < path < model < header);
faults add up, and where two apply to the same (turn, attempt) the later source's is injected.
`fault=none` drops the faults of every earlier source (a scenario file's, say) for this request.

Keys:
    latency=MS          time to first byte, in milliseconds
    rate=TPS            streaming pace, tokens per second (default: as fast as possible)
    retry=MS            the Retry-After sent with a 429 (default 100 ms)
    fault=KIND[@T][xK]  KIND is 429, 500, 529, 401, hang or malformed; on turn T only (0-based, as
                        turns count; default: every turn), for the first K attempts (default 1)
    fault=KIND:N[@T][xK]  KIND is stream_error (the API's own mid-stream error event) or drop
                        (the connection closes mid-body), after N events of the stream;
                        N may be a time instead, `drop:200ms`, at most 300000 ms (see `midstream`)
    fault=none          no fault from the sources before this one
    usage=recorded      serve a scenario reply's recorded `usage` instead of the o200k recount
                        (`usage=counted`, the default, recounts)
    cache=on|off        prompt caching as the providers do it (default on; see `caching`)
    cache=miss@T        turn T reads nothing from the cache (an eviction); repeatable
    chunk=N             tokens per streamed delta, tool-call arguments included (default: the
                        reply's own `chunk`, 1)
    ratelimit=R:T       the rate-limit headers' limits: R requests and T tokens a minute
    remaining=R:T       the rate-limit headers' remaining requests and tokens (default: the
                        limits, a stateless server keeps no window; see `headers`)
    undeclared_tools=allow|refuse
                        refuse: a scripted call of a tool the request does not declare is a
                        `script_mismatch` error (default allow: served as scripted)
    scenario=NAME       the scenario, whatever the model name says (base URL or header only)
    content_filter=on|off
                        Azure's routes: chat replies carry `prompt_filter_results` and each
                        choice's `content_filter_results`, every category safe (default off)

The attempt number is what the client says it is: `x-stainless-retry-count` (sent by the
official openai client) or `x-lab-attempt` (sent by this lab's harness), 0-based. That keeps
faults stateless: "429 on the first two attempts of turn 1" needs no memory on the server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from mockprovider.errors import invalid

FaultKind = Literal["429", "500", "529", "401", "hang", "malformed", "stream_error", "drop"]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
MIDSTREAM_KINDS = ("stream_error", "drop")

SYNTAX = (
    "options: 'key=value' items joined by '+', as a model suffix (plan+latency=250), "
    "a base-URL path prefix (/o/latency=250/v1) or an x-mock-options header; keys: "
    "latency=MS, rate=TPS, retry=MS, chunk=N, usage=counted|recorded, cache=on|off|miss@TURN, "
    "ratelimit=R:T, remaining=R:T, fault=none, fault=KIND[:N|:MSms][@TURN][xK] with KIND in "
    + ", ".join(FAULT_KINDS)
    + " (TURN 0-based; N events or MS milliseconds into the reply: stream_error and drop only)"
    + ", undeclared_tools=allow|refuse, content_filter=on|off (Azure's routes), scenario=NAME"
    " (base URL or header: the scenario, whatever the model is); the attempt comes from"
    " x-stainless-retry-count or x-lab-attempt"
)

_ATTEMPT = re.compile(r"[0-9]{1,9}")
_CACHE_MISS = re.compile(r"miss@([0-9]{1,9})")
_FAULT = re.compile(
    # Digits are bounded: int() refuses strings over 4,300 digits, and no turn is that long.
    r"(?P<kind>" + "|".join(FAULT_KINDS) + r")(?::(?P<after>[0-9]{1,9})(?P<ms>ms)?)?"
    r"(?:@(?P<turn>[0-9]{1,9}))?(?:x(?P<times>[0-9]{1,9}))?"
)


@dataclass(frozen=True, kw_only=True)
class Fault:
    kind: FaultKind
    turn: int | None = None
    """Only this turn index; None means every turn."""
    attempts: int = 1
    """Applies while the client's attempt number is below this."""
    after_events: int = 0
    """Mid-stream kinds: the events sent before the fault."""
    after_ms: float | None = None
    """Mid-stream kinds: milliseconds into the reply before the fault (instead of events)."""

    @property
    def midstream(self) -> bool:
        return self.kind in MIDSTREAM_KINDS

    def applies(self, turn: int, attempt: int) -> bool:
        return (self.turn is None or self.turn == turn) and attempt < self.attempts


@dataclass(frozen=True, kw_only=True)
class Options:
    latency_ms: float = 0.0
    rate_tps: float | None = None
    retry_ms: int = 100
    faults: tuple[Fault, ...] = field(default_factory=tuple)
    refuse_undeclared: bool = False
    """`undeclared_tools=refuse`: a scripted call of a tool the request does not declare is an error."""
    usage: Literal["counted", "recorded"] = "counted"
    """"recorded": a reply's recorded usage, when it has one, instead of the o200k recount."""
    cache: bool = True
    """Prompt caching as the providers do it (`mockprovider.caching`)."""
    cache_misses: frozenset[int] = frozenset()
    """Turns that read nothing from the cache."""
    chunk: int | None = None
    """Tokens per streamed delta; None: the reply's own `chunk`."""
    ratelimit: tuple[int, int] = (10_000, 30_000_000)
    """Requests and tokens a minute, as the rate-limit headers state them."""
    remaining: tuple[int, int] | None = None
    """Requests and tokens left, as the headers state them; None: the limits."""
    content_filter: bool = False
    """Azure's routes: chat replies carry Azure's content-filter results."""

    def fault_for(self, turn: int, attempt: int) -> Fault | None:
        if not self.faults:  # nearly every request: no generator to build and exhaust
            return None
        return next((f for f in self.faults if f.applies(turn, attempt)), None)


# Bounds keep one request from holding a connection for ever: a wait is at most five minutes
# (the hung-response fault's own limit), and a stream at least one token per second.
_RANGES = {"latency": (0.0, 300_000.0), "rate": (1.0, 1e9), "retry": (0.0, 300_000.0), "chunk": (1.0, 1e6)}


def _number(key: str, value: str, *, param: str) -> float:
    low, high = _RANGES[key]
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if key == "rate" and number == 0:
        return 0.0  # rate=0: as fast as possible
    if not low <= number <= high:
        raise invalid(f"option {key}={value!r} must be a number from {low:g} to {high:g}; {SYNTAX}",
                      param=param)
    return number


def _fault(value: str, *, param: str) -> Fault:
    m = _FAULT.fullmatch(value)  # not match() with '$', which also passes a trailing newline
    if not m:
        raise invalid(f"bad fault {value!r}; {SYNTAX}", param=param)
    after = int(m["after"]) if m["after"] is not None else None
    if after is not None and m["kind"] not in MIDSTREAM_KINDS:
        only = " and ".join(MIDSTREAM_KINDS)
        raise invalid(f"bad fault {value!r}: only {only} take ':N'; {SYNTAX}", param=param)
    if m["ms"] and after > _RANGES["latency"][1]:  # the cut is a wait too, bounded as latency is
        raise invalid(f"bad fault {value!r}: a time must be at most {_RANGES['latency'][1]:g} ms; {SYNTAX}",
                      param=param)
    return Fault(
        kind=m["kind"],  # type: ignore[arg-type]
        turn=int(m["turn"]) if m["turn"] is not None else None,
        attempts=int(m["times"]) if m["times"] is not None else 1,
        after_events=after if after is not None and not m["ms"] else 0,
        after_ms=float(after) if after is not None and m["ms"] else None,
    )


_PAIR = re.compile(r"([0-9]{1,12}):([0-9]{1,15})")


def _pair(key: str, value: str, *, param: str) -> tuple[int, int]:
    m = _PAIR.fullmatch(value)
    if not m:
        raise invalid(f"option {key}={value!r} must be REQUESTS:TOKENS, two whole numbers; {SYNTAX}",
                      param=param)
    return int(m[1]), int(m[2])


def _cache(value: str, misses: frozenset[int], *, param: str) -> dict:
    if value in ("on", "off"):
        return {"cache": value == "on"}
    m = _CACHE_MISS.fullmatch(value)
    if not m:
        raise invalid(f"bad cache option {value!r}; {SYNTAX}", param=param)
    return {"cache_misses": misses | {int(m[1])}}


def apply(base: Options, text: str, *, param: str) -> Options:
    """`base` updated by one options string; `param` names where it came from, for errors."""
    if not text:
        return base
    updates: dict = {}
    faults: list[Fault] = []
    earlier = base.faults
    for item in text.split("+"):
        key, sep, value = item.partition("=")
        if not sep:
            raise invalid(f"bad option {item!r}; {SYNTAX}", param=param)
        if key == "latency":
            updates["latency_ms"] = _number(key, value, param=param)
        elif key == "rate":
            updates["rate_tps"] = _number(key, value, param=param) or None
        elif key == "retry":
            updates["retry_ms"] = int(_number(key, value, param=param))
        elif key == "fault" and value == "none":
            faults, earlier = [], ()
        elif key == "fault":
            faults.append(_fault(value, param=param))
        elif key == "undeclared_tools":
            if value not in ("allow", "refuse"):
                raise invalid(
                    f"option undeclared_tools={value!r} must be allow or refuse; {SYNTAX}", param=param
                )
            updates["refuse_undeclared"] = value == "refuse"
        elif key == "scenario":
            continue  # chosen by pipeline.resolve, before any options apply
        elif key == "usage":
            if value not in ("counted", "recorded"):
                raise invalid(f"option usage={value!r} must be 'counted' or 'recorded'; {SYNTAX}",
                              param=param)
            updates["usage"] = value
        elif key == "chunk":
            updates["chunk"] = int(_number(key, value, param=param))
        elif key in ("ratelimit", "remaining"):
            updates[key] = _pair(key, value, param=param)
        elif key == "content_filter":
            if value not in ("on", "off"):
                raise invalid(f"option content_filter={value!r} must be on or off; {SYNTAX}", param=param)
            updates["content_filter"] = value == "on"
        elif key == "cache":
            updates |= _cache(value, updates.get("cache_misses", base.cache_misses), param=param)
        else:
            raise invalid(f"unknown option {key!r}; {SYNTAX}", param=param)
    # This source's faults go first: on a (turn, attempt) that two sources fault, the later
    # source's fault is the one injected, as the later source wins for every other option.
    options = replace(base, faults=(*faults, *earlier), **updates)
    left, limits = options.remaining, options.ratelimit
    if left is not None and (left[0] > limits[0] or left[1] > limits[1]):
        raise invalid(f"option remaining={left[0]}:{left[1]} is above ratelimit={limits[0]}:{limits[1]}; "
                      f"{SYNTAX}", param=param)
    return options


def attempt_of(*values: str | None) -> int:
    """The client's own count of this request's retries (0 for the first try), from the first of
    its headers (`x-lab-attempt`, `x-stainless-retry-count`) that holds one."""
    for value in values:
        # Plain ASCII digits only (isdigit() alone admits "²"), and few enough for int().
        if value is not None and _ATTEMPT.fullmatch(value.strip()):
            return int(value)
    return 0

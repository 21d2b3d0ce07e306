"""`/healthz` latency while a mock in its own process serves one 100,000-item body for each
list-shaped field of every format (`tests/list_fields.py`: messages, content blocks and parts,
tools, tool calls and their results, in Chat Completions, Responses, Messages, Gemini, Converse
and Ollama), one after another.

The probe asks `/healthz` every 10 ms from its own thread; a probe held up also counts the probes
it held up. The figure is its p99 (target <= 100 ms). `make test` runs a short version (2,000
items a field) as a smoke test.
"""

from __future__ import annotations

from list_fields import FIELDS, p99_while_every_field_is_served

ITEMS = 100_000
SMOKE_ITEMS = 2_000


def test_healthz_p99_while_100k_item_bodies_of_every_format_are_served(benchmark):
    items = SMOKE_ITEMS if benchmark.disabled else ITEMS
    p99, probes, answered = benchmark.pedantic(p99_while_every_field_is_served, args=(items,),
                                               rounds=1, iterations=1)
    key = ("/healthz p99 while 100,000-item bodies of every format's list fields are served, ms "
           "(target <= 100)")
    benchmark.extra_info[key] = round(p99 * 1000, 1)
    benchmark.extra_info["/healthz probes during those bodies"] = probes
    assert answered == [(field, 200) for field in FIELDS] and probes >= 1

"""`python -m experiments.bench.connection_overhead [ROUNDS]`: the exits kit's overhead figure
(`exitkit.overhead`: per turn, wall time less the mock's, over a bare httpx loop's) for our
harness as it is and for the same harness over httpx's transport (httpcore) instead of our own
keep-alive connections (`harness.http1`), interleaved round by round on one mock, for `plan`
(cap 20) and `runaway` (cap 100). Prints one line per pair and the medians.

`OursOverHttpcore` is the adapter of the second side: the kit runs it, like any adapter, in a
process of its own; it imports httpcore and its backends on import, as `import harness` did
before a plain-http client stopped needing them, so neither side pays for imports in its timing.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from exitkit.adapters import ours
from exitkit.contract import Job, Outcome
from exitkit.loader import declared, load
from exitkit.overhead import _pairs
from exitkit.runner import Kit
from harness import ModelClient
from harness.client import _httpx_transport_imports, _no_tls

_httpx_transport_imports()
RUNS = (("plan", 20), ("runaway", 100))
SIDES = {"ours": "exitkit.adapters.ours:Ours",
         "over httpcore": "experiments.bench.connection_overhead:OursOverHttpcore"}


class _ClientOverHttpcore(ModelClient):
    def __init__(self, base_url: str | None = None, **kw: Any) -> None:
        super().__init__(base_url, transport=httpx.AsyncHTTPTransport(verify=_no_tls()), **kw)


class OursOverHttpcore(ours.Ours):
    name = "ours, over httpcore"

    async def run(self, job: Job) -> Outcome:
        kept, ours.ModelClient = ours.ModelClient, _ClientOverHttpcore  # type: ignore[misc]
        try:
            return await super().run(job)
        finally:
            ours.ModelClient = kept  # type: ignore[misc]


def main(rounds: int) -> None:
    who = {side: declared(spec, load(spec)) for side, spec in SIDES.items()}
    ratios: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="connection-overhead-") as tmp, Kit.serve(Path(tmp)) as kit:
        for r in range(rounds):
            for scenario, cap in RUNS:
                for side in list(who)[:: 1 if r % 2 == 0 else -1]:
                    row = _pairs(kit, who[side], scenario, cap, 1)
                    ratio = row["per turn ms"] / row["bare httpx per turn ms"]
                    ratios.setdefault((scenario, side), []).append(ratio)
                    print(f"round {r} · {scenario}, cap {cap} · {side}: {row['per turn ms']} ms per turn, "
                          f"bare httpx {row['bare httpx per turn ms']} ms: {ratio:.2f}x", flush=True)
    for (scenario, side), values in ratios.items():
        print(f"{scenario} · {side}: median {statistics.median(values):.2f}x bare httpx "
              f"({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)

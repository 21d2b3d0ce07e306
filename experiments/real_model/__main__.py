"""`python -m experiments.real_model` (`make real-model`): the six tasks against a local model.

Starts the model server on a loopback port (or uses `LLM_BASE_URL` if set), runs the tasks,
prints one line per task as the chapter does, and writes `results/real_model.md` and `.csv`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

from experiments.lab.paths import RESULTS
from experiments.lab.report import outcome, write
from experiments.lab.runs import Env
from experiments.real_model import tasks
from experiments.real_model.server import local_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.real_model", description=__doc__)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="real-model-") as tmp:
        given = os.environ.get("LLM_BASE_URL")
        server = nullcontext(given) if given else local_model(Path(tmp) / "llama-server.log")
        with server as base_url:
            print(f"model at {base_url}; running the chapter's six tasks", flush=True)
            measured = asyncio.run(tasks.measure(Env(base_url=base_url, workdir=Path(tmp))))
    o = outcome(tasks, measured)
    for r in measured.results:
        s = r.run.state
        print(
            f"turns={s.turns} tools={len(s.tool_runs)} wall={r.run.wall_ms:>8,.0f}ms  {r.task:<42} "
            f"-> {' '.join((s.answer or s.status).split())[:70]!r}  right={r.right}",
            flush=True,
        )
    print(o.prose.finding, flush=True)
    for path in write(tasks.NAME, tasks.TITLE, o, args.out, command="make real-model"):
        print(f"wrote {path}", flush=True)
    if o.broken:
        print(f"finding did not hold: {', '.join(o.broken)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

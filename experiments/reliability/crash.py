"""`python -m experiments.reliability.crash SPEC -- HARNESS-CLI-ARGS`: die, or wait, at an exact point.

Runs the harness CLI in this process. SPEC says what happens at the loop's named checkpoints
(see `harness.loop`), with no sleeps and no luck — the same point every time:

- `B1,B2,...`: SIGKILL itself the moment the checkpoints were passed in this order;
  `after_tool_result,after_tool_result` dies right after the second turn is saved with its result,
  `after_intent,before_save` after a write ran but before its result was saved.
- `hold:B1,B2,...`: at that point print `HOLDING` on stderr and wait for a line on stdin, then
  go on — a second process can be tried while this one is known to own the run mid-way.
- `gate`: print `READY` on stderr, then wait for a line on stdin before starting at all — a
  start barrier, so a test can release several processes at the same moment.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

from harness.cli import main as harness_main

HOLDING = "HOLDING"
READY = "READY"


def _at(sequence: list[str], then: Callable[[], None]) -> Callable[[str], None]:
    remaining = list(sequence)

    def checkpoint(name: str) -> None:
        if remaining and name == remaining[0]:
            remaining.pop(0)
            if not remaining:
                then()

    return checkpoint


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _wait() -> None:
    print(HOLDING, file=sys.stderr, flush=True)
    sys.stdin.readline()


def killer(sequence: list[str]) -> Callable[[str], None]:
    return _at(sequence, _die)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    spec, cli = args[0], args[2:]
    if spec == "gate":
        print(READY, file=sys.stderr, flush=True)
        sys.stdin.readline()
        return harness_main(cli)
    if spec.startswith("hold:"):
        return harness_main(cli, checkpoint=_at(spec.removeprefix("hold:").split(","), _wait))
    return harness_main(cli, checkpoint=killer(spec.split(",")))


if __name__ == "__main__":
    sys.exit(main())

"""`python -m experiments.crash BOUNDARY[,BOUNDARY...] -- HARNESS-CLI-ARGS`: die at an exact point.

Runs the harness CLI in this process and SIGKILLs it the moment the loop has passed the
named checkpoints in order (see `harness.loop`): `after_model_reply,after_model_reply` dies
right after the second reply is saved; `after_intent,before_save` dies after a write ran but
before its result was saved. No sleeps, no luck: the same point every time.
"""

from __future__ import annotations

import os
import signal
import sys

from harness.cli import main as harness_main


def killer(sequence: list[str]):
    remaining = list(sequence)

    def checkpoint(name: str) -> None:
        if remaining and name == remaining[0]:
            remaining.pop(0)
            if not remaining:
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)

    return checkpoint


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    return harness_main(args[2:], checkpoint=killer(args[0].split(",")))


if __name__ == "__main__":
    sys.exit(main())

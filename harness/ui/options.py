"""The `ui` command's options (argparse only here: the CLI builds its parser, and imports this
module, without loading a web stack)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

DEFAULT_PORT = 8765
TOKEN_ENV = "HARNESS_UI_TOKEN"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    # No abbreviations: `--token SECRET` would otherwise mean `--token-file SECRET` and print the secret.
    u = sub.add_parser("ui", help="runs and approvals in a browser (see docs/ui.md)", allow_abbrev=False)
    u.add_argument("--host", default=None,
                   help="address to bind (default: 127.0.0.1 only); any other needs a token, "
                        f"from --token-file or ${TOKEN_ENV}")
    u.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"default {DEFAULT_PORT}; 0 picks a free one")
    u.add_argument("--token-file", type=Path, default=None,
                   help=f"file holding the token a browser must give (else ${TOKEN_ENV}); "
                        "never on the command line")
    u.add_argument("--resume", action="store_true",
                   help="continue a run in this process once a person decided "
                        "(default: leave it to a worker)")
    u.add_argument("--kit-reports", type=Path, default=None, metavar="DIR",
                   help="folder of the exits kit's report folders, shown at /kit")
    u.add_argument("--poll-seconds", type=float, default=1.0, help="how often live pages look for changes")
    return u

"""A command that tells what the kit handed it (`probe.py`); deletes a file over MCP with a helper
process beside it (`probe.py deletes`: what the crash case does to a command's group); or starts
the slow tool and, at Stop, exits at once without cancelling it (`probe.py abandons`)."""

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

MODE = sys.argv[1] if len(sys.argv) > 1 else "probe"


async def scan(url):
    from mcp import Client

    async with Client(url) as tools:
        await tools.call_tool("scan_archive", {})


def abandon(signum, frame):
    print(json.dumps({"status": "stopped"}), flush=True)
    os._exit(0)


async def delete(url):
    from mcp import Client

    async with Client(url) as tools:
        result = await tools.call_tool("delete_file", {"path": "notes.txt"})
    print(json.dumps({"status": "survived the effect", "answer": result.content[0].text}), flush=True)


if os.environ["EXITKIT_ACTION"] == "describe":
    print(json.dumps({"limits": ["approval", "resume"]}))  # no name: the card shows the command line
elif MODE == "probe":
    seen = {"env": {k: v for k, v in os.environ.items() if k.startswith(("EXITKIT_", "OPENAI_"))},
            "job": json.loads(Path(os.environ["EXITKIT_JOB"]).read_text()), "cwd": os.getcwd(),
            "leads its group": os.getpgid(0) == os.getpid()}
    print(json.dumps({"status": "returned", "answer": json.dumps(seen)}))
elif MODE == "abandons":
    signal.signal(signal.SIGINT, abandon)
    asyncio.run(scan(os.environ["EXITKIT_MCP_URL"]))
else:
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(os.environ["EXITKIT_STATE_DIR"], "helper").write_text(str(helper.pid))
    asyncio.run(delete(os.environ["EXITKIT_MCP_URL"]))

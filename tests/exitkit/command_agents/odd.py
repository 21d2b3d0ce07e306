"""Commands that are no good agents, each in one way (`python odd.py MODE`): the kit must say what
is wrong in one line, or judge what the run did, and always return."""

import json
import os
import signal
import subprocess
import sys
import time

MODE = sys.argv[1]
ACTION = os.environ["EXITKIT_ACTION"]
HOSTILE = "\x1b[2J\x1b]0;owned\x07\r"
"""Clears the screen, sets the terminal's title, rewrites the line: shown as escapes, never sent."""


def leave_a_helper(**how):
    """A process that holds this one's standard output and error, and would sleep for ten minutes."""
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], **how)
    if "EXITKIT_TEST_HELPERS" in os.environ:
        with open(os.environ["EXITKIT_TEST_HELPERS"], "a") as pids:
            pids.write(f"{helper.pid}\n")


if MODE == "throws":  # as Node dies of an uncaught error: the message first, then a long stack
    print("file:///agent/agent.ts:1\nconst job = JSON.parse(process.env.EXITKIT_JOB);\n      ^\n\n"
          'SyntaxError: "undefined" is not valid JSON', file=sys.stderr)
    for depth in range(20):
        print(f"    at ModuleJob.run (node:internal/modules/esm/module_job:{depth}:25)", file=sys.stderr)
    print("\nNode.js v20.20.2", file=sys.stderr)
    sys.exit(1)
if ACTION == "describe":
    if MODE == "garbage":
        print("starting up…\n{not json")
    elif MODE == "fails":
        print(f"no config here{HOSTILE}", file=sys.stderr)
        sys.exit(3)
    else:
        limits = {"approval-only": ["approval"], "unknown": ["max_turns", "max_turn"]}.get(MODE, [])
        print(json.dumps({"name": f"odd {MODE}{HOSTILE if MODE == 'hostile' else ''}", "limits": limits}))
elif MODE == "silent":
    print("a log line, no outcome")
    print("dying: the model is unreachable", file=sys.stderr)
    sys.exit(3)
elif MODE == "hostile":
    leave_a_helper()
    sys.stdout.write("x" * 3_000_000 + "\n" + "\x00\x1b" * 1000 + "\n")
    print(json.dumps({"status": f"done{HOSTILE}", "answer": f"red{HOSTILE}", "transcript_messages": "many"}))
elif MODE == "detaches":
    leave_a_helper(start_new_session=True)  # out of the command's process group: `detached: true` in Node
    print(json.dumps({"status": "done"}))
elif MODE == "plants":
    # Symlinks where the kit writes next (the next run's job file and logs, the tools' log, the
    # ledger), each pointing at a file outside the run's folder.
    job = os.environ["EXITKIT_JOB"]
    folder, n = os.path.dirname(job), int(os.path.basename(job)[len("job-"):-len(".json")])
    victim = os.environ["EXITKIT_TEST_VICTIM"]
    for name in (f"job-{n + 1}.json", f"job-{n + 1}.out", f"job-{n + 1}.err", "tools.log", "ledger.jsonl"):
        os.remove(os.path.join(folder, name)) if os.path.lexists(os.path.join(folder, name)) else None
        os.symlink(victim, os.path.join(folder, name))
    print(json.dumps({"status": "planted"}))
elif MODE == "stubborn":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    leave_a_helper()
    while True:
        time.sleep(1)

"""`make peers` runs an agent in another language (a command line) beside the Python adapters:
a row per command on the same framework's card, in the order the framework lists them."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from experiments.peers import Framework, one
from experiments.peers.__main__ import _broken

AGENT = Path(__file__).parents[1] / "exitkit" / "command_agents" / "file_agent.py"


def test_a_frameworks_card_runs_its_commands_beside_its_adapters(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "exitkit"))  # file_loop, for the child
    line = shlex.join([sys.executable, str(AGENT)])
    framework = Framework(name="mixed", extra=None, packages=("httpx",),
                          adapters={"file_loop:FileLoop": ("tool_error",)}, commands={line: ("tool_error",)})
    monkeypatch.setattr(one, "FRAMEWORKS", (framework,))
    out = tmp_path / "mixed.json"
    assert one.main(["mixed", str(out)]) == 0
    report = json.loads(out.read_text())["report"]
    assert [(a["spec"], a["name"]) for a in report["adapters"]] == [("file_loop:FileLoop", "file loop"),
                                                                   (line, "file agent, a command")]
    assert [(r["adapter"], r["verdict"]) for r in report["results"]] == [("file loop", "pass"),
                                                                        ("file agent, a command", "pass")]


def test_a_framework_of_commands_only_that_could_not_be_installed_is_a_row_of_errors() -> None:
    framework = Framework(name="node", extra=None, packages=("ai",), commands={"node agent.mjs": ()})
    who, results = _broken(framework, "npm ci failed")
    assert [(a.spec, a.name) for a in who] == [("node agent.mjs", "node")]
    assert {(r.verdict, r.summary) for r in results} == {("error", "npm ci failed")}

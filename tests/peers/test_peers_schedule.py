"""`make peers` runs a framework's cases judged on counts while later virtualenvs still install,
and the cases whose figures are times only once every install is done, alone; the two parts of a
framework's card come back together in the card's order."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from pathlib import Path

from exitkit.contract import Declared
from exitkit.verdict import CASES, Result
from experiments.peers import Framework, one
from experiments.peers import __main__ as peers
from experiments.peers.venvs import Venv

AGENT = Path(__file__).parents[1] / "exitkit" / "command_agents" / "file_agent.py"


def test_timing_cases_run_only_after_every_install_and_never_beside_another_card(tmp_path,
                                                                                 monkeypatch) -> None:
    frameworks = [Framework(name=n, extra=f"peers-{n}", packages=("x",), adapters={f"m:{n}": ()})
                  for n in ("a", "b", "c", "d")]
    events: list[tuple[str, str, str]] = []
    lock = threading.Lock()

    def ensure(root, name, extra, log):
        with lock:
            events.append(("build", "start", name))
        time.sleep({"a": 0.05, "b": 0.4, "c": 0.1, "d": 0.3}[name])
        with lock:
            events.append(("build", "end", name))
        return Venv(python=Path(sys.executable))

    def card(framework, python, fast, tmp, cases):
        with lock:
            events.append(("card", "start", ",".join(cases)))
        time.sleep(0.05)
        with lock:
            events.append(("card", "end", ",".join(cases)))
        who = {"spec": f"m:{framework.name}", "name": framework.name, "limits": []}
        results = [Result(case=c, adapter=framework.name, verdict="pass", summary="ok").to_json()
                   for c in cases]
        return {"versions": {"x": "1"}, "report": {"adapters": [who], "results": results}}

    monkeypatch.setattr(peers, "ensure", ensure)
    monkeypatch.setattr(peers, "_card", card)
    monkeypatch.setattr(peers, "INSTALLS_AT_ONCE", 2)
    cards = peers._cards(frameworks, False, tmp_path, time.monotonic())
    last_build = max(i for i, e in enumerate(events) if e[0] == "build")
    cards_of = lambda cases: [i for i, e in enumerate(events) if e[0] == "card" and e[2] == ",".join(cases)]  # noqa: E731
    timing, behaviour = cards_of(peers.TIMING), cards_of(peers.BEHAVIOUR)
    assert len(timing) == 8 and min(timing) > last_build  # after every install, start and end each
    assert min(behaviour) < last_build  # the first framework's behaviour ran beside the installs
    opened = 0
    for kind, edge, _ in events:  # one card at a time
        if kind == "card":
            opened += 1 if edge == "start" else -1
            assert opened in (0, 1)
    for framework, (versions, (who, results), _) in zip(frameworks, cards, strict=True):
        assert versions == {"x": "1"} and [a.name for a in who] == [framework.name]
        assert [r.case for r in results] == list(CASES)


def test_a_frameworks_two_parts_merge_into_its_rows_in_the_cards_order() -> None:
    framework = Framework(name="f", extra="peers-f", packages=("x",),
                          adapters={"m:Main": (), "m:Fix": ("tool_error",)})
    main, fix = Declared(spec="m:Main", name="Main"), Declared(spec="m:Fix", name="Fix")

    def results(who: Declared, cases) -> list[Result]:
        return [Result(case=c, adapter=who.name, verdict="pass", summary=c) for c in cases]

    behaviour = ({"x": "1"}, ([main, fix], results(main, peers.BEHAVIOUR) + results(fix, ["tool_error"])),
                 3.0)
    timing = ({"x": "1"}, ([main], results(main, peers.TIMING)), 2.0)
    versions, (who, merged), seconds = peers._merged(framework, [behaviour, timing])
    assert (versions, seconds, [a.name for a in who]) == ({"x": "1"}, 5.0, ["Main", "Fix"])
    assert [(r.adapter, r.case) for r in merged] == [("Main", c) for c in CASES] + [("Fix", "tool_error")]


def test_a_framework_not_installed_is_a_row_of_errors_in_both_parts(tmp_path) -> None:
    framework = Framework(name="gone", extra="peers-gone", packages=("x",), adapters={"m:Gone": ()})
    venv = Venv(python=None, error="pip install failed: no such package", built=True)
    parts = [(*peers._measure(framework, venv, False, tmp_path, cases), 0.0)
             for cases in (peers.BEHAVIOUR, peers.TIMING)]
    versions, (who, results), _ = peers._merged(framework, parts)
    assert versions == {"install": venv.error} and [a.name for a in who] == ["gone"]
    assert [(r.case, r.verdict) for r in results] == [(c, "error") for c in CASES]


def test_a_frameworks_card_runs_only_the_cases_asked_and_skips_an_adapter_left_with_none(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "exitkit"))  # file_loop, for the child
    line = shlex.join([sys.executable, str(AGENT)])
    framework = Framework(name="mixed", extra=None, packages=("httpx",),
                          adapters={"file_loop:FileLoop": ("tool_error", "permanent_error")},
                          commands={line: ("budget",)})
    monkeypatch.setattr(one, "FRAMEWORKS", (framework,))
    out = tmp_path / "mixed.json"
    assert one.main(["mixed", str(out), "--cases", "tool_error,overhead"]) == 0
    report = json.loads(out.read_text())["report"]
    assert [a["spec"] for a in report["adapters"]] == ["file_loop:FileLoop"]
    assert [(r["adapter"], r["case"]) for r in report["results"]] == [("file loop", "tool_error")]

"""Every bad scenario file fails at start-up, on one line: the file, the JSON path, what was expected."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from mockprovider.app import create_app
from mockprovider.scripts.files import ScenarioFileError
from mockprovider.scripts.parts import MAX_NESTING

ROOT = Path(__file__).resolve().parents[3]
OK_TURNS = [{"content": "fine"}]


def _deep(levels: int) -> dict[str, Any]:
    condition: dict[str, Any] = {"user_contains": "x"}
    for _ in range(levels):
        condition = {"all": [condition]}
    return condition


def _matching(pattern: str) -> dict[str, Any]:
    return {"name": "r", "turns": [[{"if": {"tool_result_matches": pattern}, "content": "x"}]]}


# (file name, document or raw text, the JSON path named, words of what was expected)
BAD_FILES: list[tuple[str, Any, str, str]] = [
    ("unknown.json", {"name": "u", "turns": OK_TURNS, "colour": "red"}, "$.colour",
     "unknown key; expected one of: name, description, options, turns, after_last"),
    ("type.json", {"name": "t", "turns": "hello"}, "$.turns", "expected an array of turns, got a string"),
    ("empty.json", {"name": "e", "turns": []}, "$.turns",
     "expected at least one of turns, got an empty array"),
    ("missing.json", {"name": "m"}, "$", "missing the required key 'turns'"),
    ("regex.json", {"name": "r", "turns": [[{"if": {"tool_result_matches": "(unclosed"}, "content": "x"}]]},
     "$.turns[0][0].if.tool_result_matches", "not a pattern RE2 can match in linear time (missing )"),
    # Matched by RE2 in linear time: what only a backtracking engine can do is refused, by name.
    ("backref.json", _matching(r"(.*)\1x"), "$.turns[0][0].if.tool_result_matches",
     "not a pattern RE2 can match in linear time (invalid escape sequence: \\1)"),
    ("lookahead.json", _matching(r"(?=a)\w+"), "$.turns[0][0].if.tool_result_matches",
     "backreferences and lookaround are not available"),
    ("lastuser.json", {"name": "l", "turns": [[{"if": {"last_user_matches": "(?<!a)b"}, "content": "x"}]]},
     "$.turns[0][0].if.last_user_matches", "not a pattern RE2 can match"),
    ("atomic.json", _matching(r"(?>(a+)+b)"), "$.turns[0][0].if.tool_result_matches",
     "not a pattern RE2 can match"),
    ("huge.json", _matching(r"(\w+\s?){1,1000}\d"), "$.turns[0][0].if.tool_result_matches",
     "RE2 instructions, more than the limit of 1000"),
    ("neither.json", {"name": "n", "turns": [{}]}, "$.turns[0]",
     "expected 'content', 'tool_calls' (or both), or 'error'"),
    ("errorandtext.json",
     {"name": "e", "turns": [{"content": "x", "error": {"status": 429, "message": "m"}}]},
     "$.turns[0]", "an 'error' reply carries no 'content' or 'tool_calls'"),
    ("status.json", {"name": "s", "turns": [{"error": {"status": 200, "message": "m"}}]},
     "$.turns[0].error.status", "expected a number from 400 to 599, got 200"),
    ("header.json", {"name": "h", "turns": [{"error": {"status": 503, "message": "m",
                                                      "headers": {"retry after": "1"}}}]},
     '$.turns[0].error.headers["retry after"]', "not a valid HTTP header name"),
    ("framing.json", {"name": "f", "turns": [{"error": {"status": 503, "message": "m",
                                                       "headers": {"Content-Length": "1"}}}]},
     '$.turns[0].error.headers["Content-Length"]', "set by the server from the body it sends"),
    ("chunk.json", {"name": "c", "turns": [{"content": "x", "chunk": 0}]}, "$.turns[0].chunk",
     "expected a number from 1 to"),
    ("reasoning.json", {"name": "r", "turns": [{"content": "x", "reasoning": 0}]}, "$.turns[0].reasoning",
     "expected a number from 1 to"),
    ("emptythought.json", {"name": "e", "turns": [{"content": "x", "reasoning": ""}]}, "$.turns[0].reasoning",
     "empty"),
    ("usage.json", {"name": "u", "turns": [{"content": "x", "usage": {"prompt_tokens": 3}}]},
     "$.turns[0].usage", "missing the required key 'completion_tokens'"),
    ("turnatleast.json", {"name": "t", "turns": [[{"if": {"turn_at_least": -1}, "content": "x"}]]},
     "$.turns[0][0].if.turn_at_least", "expected a number from 0 to"),
    ("not.json", {"name": "n", "turns": [[{"if": {"not": "x"}, "content": "x"}]]},
     "$.turns[0][0].if.not", "expected an object, got a string"),
    ("condition.json", {"name": "c", "turns": [[{"if": {"tool_result_contain": "x"}, "content": "x"}]]},
     "$.turns[0][0].if.tool_result_contain", "unknown key; expected one of: tool_result_contains"),
    ("content.json", {"name": "c", "turns": [{"content": 5}]}, "$.turns[0].content",
     "expected a string, got a number"),
    ("callname.json", {"name": "c", "turns": [{"tool_calls": [{"arguments": {}}]}]},
     "$.turns[0].tool_calls[0]", "missing the required key 'name'"),
    ("arguments.json", {"name": "a", "turns": [{"tool_calls": [{"name": "f", "arguments": 3}]}]},
     "$.turns[0].tool_calls[0].arguments", "expected an object or a JSON string, got a number"),
    ("nocalls.json", {"name": "n", "turns": [{"tool_calls": []}]}, "$.turns[0].tool_calls",
     "expected at least one of tool calls"),
    ("alternatives.json", {"name": "a", "turns": [[]]}, "$.turns[0]",
     "expected at least one of alternatives"),
    ("turn.json", {"name": "t", "turns": [7]}, "$.turns[0]",
     "expected a reply object or an array of alternatives, got a number"),
    ("bareif.json", {"name": "b", "turns": [{"if": {"user_contains": "x"}, "content": "x"}]}, "$.turns[0].if",
     "'if' belongs on an alternative"),
    ("emptyif.json", {"name": "e", "turns": [[{"if": {}, "content": "x"}]]}, "$.turns[0][0].if",
     "expected at least one condition"),
    ("emptytext.json", {"name": "e", "turns": [[{"if": {"user_contains": ""}, "content": "x"}]]},
     "$.turns[0][0].if.user_contains", "expected a non-empty string"),
    ("deep.json", {"name": "d", "turns": [[{"if": _deep(MAX_NESTING + 2), "content": "x"}]]},
     "$.turns[0][0].if" + ".all[0]" * (MAX_NESTING + 1), f"nest deeper than {MAX_NESTING}"),
    ("afterlast.json", {"name": "a", "turns": OK_TURNS, "after_last": "loop"}, "$.after_last",
     'expected "repeat" or "error", got "loop"'),
    ("options.json", {"name": "o", "turns": OK_TURNS, "options": "speed=9"}, "$.options",
     "unknown option 'speed'"),
    ("badname.json", {"name": "plan+latency=5", "turns": OK_TURNS}, "$.name", "cannot be a model name"),
    ("plan.json", {"turns": OK_TURNS}, "$ (named after the file)", "belongs to a built-in scenario"),
    ("shadow.json", {"name": "runaway", "turns": OK_TURNS}, "$.name",
     "the name 'runaway' belongs to a built-in scenario"),
    ("key.json", {"name": "k", "turns": [{"con tent": "x"}]}, '$.turns[0]["con tent"]', "unknown key"),
    ("array.json", [OK_TURNS], "$", "expected an object, got an array"),
    ("syntax.json", '{"name": "s", "turns": [}', "not valid JSON (line 1, column 25)", "Expecting value"),
    ("twice.json", '{"name": "t", "turns": [{"content": "a", "content": "b"}]}', "not valid JSON",
     "the key 'content' appears twice"),
    ("syntax.toml", 'name = "s"\nturns = [{content = }]\n', "not valid TOML", "line 2"),
    ("date.toml", 'name = "d"\n[[turns]]\ntool_calls = [{name = "f", arguments = {when = 2024-01-01}}]\n',
     "$.turns[0].tool_calls[0].arguments", "expected JSON values only"),
    ("latin1.json", b'{"name": "\xe9"}', "not UTF-8 text", "byte 10"),
    # A \ud800 escape parses to a lone surrogate, which no UTF-8 response can carry (a 500 on
    # /v1/models for every client, had the description held it).
    ("surrogate.json", '{"name": "s", "description": "odd \\ud800", "turns": [{"content": "x"}]}',
     "$.description", "a lone surrogate (\\ud800)"),
    ("surrogateargs.json",
     '{"name": "s", "turns": [{"tool_calls": [{"name": "f", "arguments": {"q": "\\udc00"}}]}]}',
     "$.turns[0].tool_calls[0].arguments", "a lone surrogate (\\udc00)"),
    ("scenario.yaml", "name: x", "expected a .json or .toml file", "'.yaml'"),
    # Python's JSON reader and TOML accept non-finite numbers; a whole-number field given one
    # was an OverflowError or ValueError traceback instead of this line.
    ("infchunk.json", '{"name": "i", "turns": [{"content": "x", "chunk": Infinity}]}', "$.turns[0].chunk",
     "expected a number from 1 to"),
    ("nanchunk.json", '{"name": "n", "turns": [{"content": "x", "chunk": NaN}]}', "$.turns[0].chunk",
     "expected a number from 1 to"),
    ("bigusage.json",
     '{"name": "b", "turns": [{"content": "x", "usage": {"prompt_tokens": 1e400, "completion_tokens": 1}}]}',
     "$.turns[0].usage.prompt_tokens", "expected a number from 0 to"),
    ("infturn.toml", 'name = "t"\n[[turns]]\ncontent = "x"\nchunk = inf\n', "$.turns[0].chunk",
     "expected a number from 1 to"),
    ("nanturn.json", '{"name": "t", "turns": [[{"if": {"turn_at_least": NaN}, "content": "x"}]]}',
     "$.turns[0][0].if.turn_at_least", "expected a number from 0 to"),
    # What uvicorn refuses to send (the connection dropped with no response) or what the
    # client would misread (a body it cannot decode).
    ("delheader.json", {"name": "d", "turns": [{"error": {"status": 503, "message": "m",
                                                         "headers": {"x-why": "a\x7fb"}}}]},
     '$.turns[0].error.headers["x-why"]', "no control"),
    ("encoding.json", {"name": "e", "turns": [{"error": {"status": 503, "message": "m",
                                                        "headers": {"Content-Encoding": "gzip"}}}]},
     '$.turns[0].error.headers["Content-Encoding"]', "set by the server from the body it sends"),
    ("spaceheader.json", {"name": "s", "turns": [{"error": {"status": 503, "message": "m",
                                                           "headers": {"x-why": " padded "}}}]},
     '$.turns[0].error.headers["x-why"]', "no leading or trailing space"),
    # Header names ignore case: one of the two values was silently dropped.
    ("twoheaders.json", {"name": "t", "turns": [{"error": {
        "status": 429, "message": "m", "headers": {"Retry-After": "1", "retry-after": "9"}}}]},
     '$.turns[0].error.headers["retry-after"]', "names the header 'Retry-After' again"),
]


def _write(folder: Path, name: str, document: Any) -> Path:
    path = folder / name
    if isinstance(document, bytes):
        path.write_bytes(document)
    else:
        path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


@pytest.mark.parametrize(("name", "document", "where", "expected"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_file_fails_at_start_up_naming_file_path_and_expectation(
    tmp_path: Path, name: str, document: Any, where: str, expected: str
):
    path = _write(tmp_path, name, document)
    with pytest.raises(ScenarioFileError) as caught:
        create_app(scenario_files=[path])
    message = str(caught.value)
    assert message.startswith(f"{path}: {where}"), message
    assert expected in message, message
    assert "\n" not in message


def test_two_files_may_not_share_a_name(tmp_path: Path):
    first = _write(tmp_path, "a.json", {"name": "same", "turns": OK_TURNS})
    second = _write(tmp_path, "b.json", {"name": "same", "turns": OK_TURNS})
    with pytest.raises(ScenarioFileError) as caught:
        create_app(scenario_files=[first, second])
    assert str(caught.value) == f"{second}: $.name: the name 'same' is already used by {first}"


def test_missing_paths_and_empty_folders_are_start_up_errors(tmp_path: Path):
    with pytest.raises(ScenarioFileError, match="nowhere.json: no such file or folder"):
        create_app(scenario_files=[tmp_path / "nowhere.json"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ScenarioFileError, match="empty: the folder holds no .json or .toml files"):
        create_app(scenario_files=[tmp_path / "empty"])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_or_device_named_like_a_scenario_is_refused_not_read_for_ever(tmp_path: Path):
    _write(tmp_path, "good.json", {"name": "good", "turns": OK_TURNS})
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            create_app(scenario_files=[tmp_path])
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome.append(e)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    loader.join(timeout=10)
    if loader.is_alive():  # blocked opening the pipe: give it a writer, then fail
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        loader.join(timeout=10)
        pytest.fail("loading a folder holding a named pipe blocked until something wrote to the pipe")
    (error,) = outcome
    assert isinstance(error, ScenarioFileError)
    assert str(error) == f"{pipe}: not a regular file"


def test_python_m_mockprovider_with_a_bad_file_exits_with_one_clear_line(tmp_path: Path):
    bad = _write(tmp_path, "bad.json", {"name": "bad", "turns": [{"content": "x", "tool_calls": []}]})
    command = [sys.executable, "-m", "mockprovider", "--port", "0", "--scenarios", str(bad)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == (
        f"mockprovider: {bad}: $.turns[0].tool_calls: expected at least one of tool calls, "
        "got an empty array\n"
    )
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_serve_passes_scenarios_to_the_server(tmp_path: Path):
    good = _write(tmp_path, "good.json", {"name": "good", "turns": OK_TURNS})
    bad = _write(tmp_path, "bad.json", {"name": "bad", "turns": []})
    # -o: never rebuild the virtualenv from here; PY: this interpreter, whatever venv runs the suite.
    command = ["make", "-s", "-o", ".venv/.installed", "serve", f"PY={sys.executable}", "PORT=0",
               f"SCENARIOS={good}:{bad}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode != 0
    assert f"mockprovider: {bad}: $.turns: expected at least one of turns" in done.stderr

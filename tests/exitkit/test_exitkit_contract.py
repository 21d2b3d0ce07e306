"""The adapter contract is checked before any case runs, and the kit's texts are the chapter's."""

from __future__ import annotations

import asyncio

import pytest

from exitkit.contract import Approve, Reject, decision_from_json, decision_to_json
from exitkit.loader import AdapterError, load
from exitkit.tools import DESCRIPTIONS, FILES, SYSTEM, TASKS


class NoLimits:
    name = "no limits"

    async def run(self, job):
        return None


class UnknownLimit:
    name = "typo"
    limits = frozenset({"max_turn"})

    async def run(self, job):
        return None


class ApprovalWithoutResume:
    name = "half"
    limits = frozenset({"approval"})

    async def run(self, job):
        return None


class ApprovalDeclaredWithoutResume(ApprovalWithoutResume):
    async def resume(self, job, decision):
        return None


@pytest.mark.parametrize(("spec", "says"), [
    ("no_colon", "MODULE:ATTRIBUTE"),
    ("no_such_module_here:Adapter", "cannot import"),
    ("raises_on_import:Adapter", "'raises_on_import' raised RuntimeError: OPENAI_API_KEY is not set"),
    ("exitkit.adapters.ours:Nope", "no attribute 'Nope'"),
    (f"{__name__}:NoLimits", "needs `limits`"),
    (f"{__name__}:UnknownLimit", "unknown limits ['max_turn']"),
    (f"{__name__}:ApprovalWithoutResume", "has no `async def resume"),
    (f"{__name__}:ApprovalDeclaredWithoutResume", "declares 'approval' without 'resume'"),
])
def test_a_bad_adapter_spec_is_refused_with_what_is_missing(spec: str, says: str) -> None:
    with pytest.raises(AdapterError, match=None) as refused:
        load(spec)
    assert says in str(refused.value)


def test_a_class_is_instantiated_and_its_declared_limits_kept() -> None:
    adapter = load("exitkit.adapters.ours:Ours")
    assert adapter.name == "ours (harness)"
    assert {"max_turns", "max_budget_usd", "approval", "cancel", "resume"} == set(adapter.limits)


def test_decisions_survive_the_trip_to_a_new_process() -> None:
    for decision in (None, Approve(), Reject("keep it")):
        assert decision_from_json(decision_to_json(decision)) == decision
    with pytest.raises(ValueError, match="not a decision"):
        decision_from_json({"approve": "yes"})


def test_the_kits_texts_are_the_harness_texts_so_tokens_match_the_chapter_runs() -> None:
    from experiments.lab.runs import TASKS as LAB_TASKS
    from harness.chapter import ACCESS_LOG, ERRORS_LOG, NOTES_TXT, PRIVATE_KEY, chapter_tools
    from harness.chapter import SYSTEM as CHAPTER_SYSTEM

    assert SYSTEM == CHAPTER_SYSTEM
    assert all(LAB_TASKS[name] == task for name, task in TASKS.items())
    assert FILES == {"errors.log": ERRORS_LOG, "access.log": ACCESS_LOG, "notes.txt": NOTES_TXT,
                     "private.key": PRIVATE_KEY}
    harness_tools = {t.name: (t.description, t.parameters) for t in chapter_tools("/nonexistent")}
    from exitkit.setup import Setup

    setup = Setup(base_url="http://127.0.0.1:1/v1", scenario="plan", folder=__import__("pathlib").Path("/x"))
    kit_tools = {t.name: (t.description, t.parameters) for t in setup.job().tools}
    assert kit_tools == {name: harness_tools[name] for name in DESCRIPTIONS}


def test_unless_stopped_cancels_the_tool_when_stop_is_pressed() -> None:
    from exitkit.setup import Setup

    seen: list[str] = []

    async def slow() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "done"

    async def scene() -> object:
        job = Setup(base_url="http://127.0.0.1:1/v1", scenario="slow",
                    folder=__import__("pathlib").Path("/x")).job()
        asyncio.get_running_loop().call_later(0.01, job.cancel.set)
        return await job.unless_stopped(slow())

    assert asyncio.run(scene()) is None
    assert seen == ["cancelled"]


def test_the_docs_worked_example_is_the_shipped_plain_loop_adapter() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    section = (root / "docs" / "exitkit.md").read_text().split("## The adapter contract")[0]
    example = section.split("```python\n")[1].split("```")[0]
    shipped = (root / "exitkit" / "adapters" / "plain.py").read_text()
    assert shipped.endswith(example)
    assert len(example.splitlines()) <= 40


def test_no_function_in_the_kit_is_longer_than_60_lines() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "exitkit"
    long = [f"{path.name}:{node.name}" for path in sorted(root.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno >= 60]
    assert long == []


def test_the_public_api_is_the_contract_and_nothing_else() -> None:
    import exitkit

    assert sorted(exitkit.__all__) == ["Adapter", "Approve", "Decision", "Job", "LIMIT_NAMES", "Limits",
                                       "Outcome", "Reject", "Tool", "ToolCancelled"]


def _job(tmp_path, scenario: str = "plan"):
    from exitkit.setup import Setup

    return Setup(base_url="http://127.0.0.1:1/v1", scenario=scenario, folder=tmp_path / "run").make().job()


def test_a_tool_as_a_python_function_has_the_signature_and_docstring_frameworks_read(tmp_path) -> None:
    import inspect

    async def scene() -> tuple[object, str]:
        read_file = _job(tmp_path).tool("read_file").function()
        return read_file, await read_file("notes.txt")

    read_file, text = asyncio.run(scene())
    assert read_file.__name__ == "read_file" and text == FILES["notes.txt"]
    signature = inspect.signature(read_file)
    assert list(signature.parameters) == ["path"] and signature.parameters["path"].annotation is str
    assert signature.parameters["path"].default is inspect.Parameter.empty
    assert signature.return_annotation is str
    args = "\n\nArgs:\n    path: A file name from list_files.\n"
    assert read_file.__doc__ == DESCRIPTIONS["read_file"] + args
    assert inspect.signature(_job(tmp_path / "b").tool("list_files").function()).parameters == {}


def test_a_blocking_tool_runs_on_the_jobs_loop_from_a_worker_thread_and_stop_cancels_it(tmp_path) -> None:
    from exitkit import ToolCancelled

    async def scene() -> tuple[str, str]:
        job = _job(tmp_path / "a", "slow")
        read_file, scan = job.blocking(job.tool("read_file")), job.blocking(job.tool("scan_archive"))
        text = await asyncio.to_thread(read_file, path="notes.txt")
        asyncio.get_running_loop().call_later(0.3, job.cancel.set)
        try:
            await asyncio.to_thread(scan)
        except ToolCancelled as e:
            return text, str(e)
        return text, "not cancelled"

    text, stopped = asyncio.run(scene())
    assert text == FILES["notes.txt"] and "Stop" in stopped
    from exitkit.ledger import Ledger

    assert Ledger(tmp_path / "a" / "run" / "ledger.jsonl").count("scan_archive", "cancelled") == 1

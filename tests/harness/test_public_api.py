import ast
import subprocess
import sys
from pathlib import Path

import pytest
from source_support import parsed

import harness

PUBLIC = {
    # the core: running, the run, deciding a waiting call
    "run", "Policy", "RunState", "new_run", "pending", "approve", "reject",
    # the seams
    "Model", "OpenAIChat", "ModelClient", "ProviderError",
    "Tool", "ToolContext", "PermanentToolError",
    "Store", "SQLiteStore", "MemoryStore", "open_store", "StateFileError", "JsonlTrace", "MemoryTrace",
    "Cancel",
    # money
    "Limits", "Pricing", "Usage",
}


def test_public_api_is_small_and_pinned():
    assert set(harness.__all__) == PUBLIC
    assert len(PUBLIC) <= 25
    for name in PUBLIC:
        assert getattr(harness, name) is not None


def test_importing_the_harness_loads_neither_the_mock_nor_its_web_stack():
    code = "import sys, harness; print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for package in ("starlette", "uvicorn", "mockprovider"):
        assert f"'{package}'" not in loaded


def _imports(path: Path, package: str) -> set[str]:
    """Modules of `package` that `path` imports, anywhere in it except `if TYPE_CHECKING:` blocks."""
    tree = parsed(path)
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == package)
    return found


@pytest.mark.parametrize("package", ["harness", "mockprovider"])
def test_no_import_cycle_between_modules(package):
    root = Path(__file__).resolve().parents[2] / package
    modules = {f"{package}.{p.stem}": p for p in root.glob("*.py") if p.stem != "__init__"}
    graph = {m: _imports(p, package) & modules.keys() for m, p in modules.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and not seen.add(n) and reaches(n, goal, seen))
                   for n in graph[start])

    cycles = [m for m in graph if reaches(m, m, set())]
    assert cycles == []

"""The mock's folders keep the order their READMEs state: scripts → reading → replies → apis → the
top, each importing only the folders before it, no surface importing another, no circle between
folders or top-level modules. Checked on the source; a planted violation proves the check sees one.
"""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ORDER = ("scripts", "reading", "replies", "apis")
KERNEL = {"cycle", "errors", "journal", "metrics", "offload"}
"""Top-level modules that import nothing of the mock, so every folder may use them."""
MAY_USE_KERNEL = {"scripts": {"errors"}, "reading": {"errors", "journal", "offload"},
                  "replies": {"errors", "metrics", "offload"},
                  "apis": KERNEL}
SHARED_STEPS = {"steps", "shared"}
OWN_HELPERS = {"gemini": {"gemini_request"}, "gemini_embed": {"gemini"}, "ollama_embed": {"ollama"},
               "anthropic": {"anthropic_request"}, "chat": {"chat_request"},
               "chat_at_once": {"chat", "chat_request"},
               "responses": {"responses_request"}, "azure": {"chat", "embeddings", "responses"},
               "bedrock": {"bedrock_request", "bedrock_eventstream"}, "bedrock_embed": {"bedrock"}}
"""A surface's own helpers; Azure OpenAI is the chat, responses and embeddings surfaces behind Azure's
doors; Gemini's, Ollama's and Bedrock's embeddings answer errors in their surface's shape."""
ONLY_THESE_REACH_THE_RECORDER = {"pytest_plugin", "cassettes", "__main__", "recorder"}


def _module_imports(path: Path, package: str) -> set[str]:
    """Absolute names of the `mockprovider` modules (or packages) `path` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {n for n in found if n.split(".")[0] == "mockprovider"}  # bare `mockprovider`: its __init__


def _unit(parts: tuple[str, ...]) -> str:
    """A folder's name, or a top-level module's."""
    return parts[0]


def _existing(root: Path, name: str) -> tuple[str, ...]:
    """The parts of `name` below `mockprovider` that name a real module or folder (an imported
    function or class is dropped; a name of the package's own `__init__` is `("__init__",)`)."""
    parts = tuple(name.split(".")[1:])
    while parts:
        path = root.joinpath("mockprovider", *parts)
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return parts
        parts = parts[:-1]
    return ("__init__",)


def folder_violations(root: Path) -> list[str]:
    """Every import in `root`'s mockprovider that breaks a rule of the folders' READMEs."""
    found: list[str] = []
    edges: dict[str, set[str]] = {}
    for path in sorted((root / "mockprovider").rglob("*.py")):
        mine = path.relative_to(root / "mockprovider").with_suffix("").parts
        if mine[-1] == "__init__":
            mine = mine[:-1] or ("__init__",)
        package = ".".join(("mockprovider", *path.relative_to(root / "mockprovider").parent.parts))
        unit = _unit(mine)
        for theirs in sorted({_existing(root, name) for name in _module_imports(path, package)}):
            other = _unit(theirs)
            where = f"{path.relative_to(root).as_posix()} imports mockprovider.{'.'.join(theirs)}"
            if other != unit:
                edges.setdefault(unit, set()).add(other)
            if unit in KERNEL and other != unit:
                found.append(f"{where}: {unit}.py imports nothing of the mock")
            if unit in ORDER and other != unit:
                allowed = set(ORDER[: ORDER.index(unit)]) | MAY_USE_KERNEL[unit]
                if other not in allowed:
                    found.append(f"{where}: {unit}/ may import only {sorted(allowed)}")
            if unit == "apis" and other == "apis" and len(mine) > 1:
                # A name the folder's __init__ holds counts as that module's: it may re-export a surface.
                me, it = mine[1], theirs[1] if len(theirs) > 1 else "__init__"
                if it != me and it not in SHARED_STEPS | OWN_HELPERS.get(me, set()):
                    found.append(f"{where}: a surface imports only the shared steps, never another surface")
                if me in SHARED_STEPS and it not in SHARED_STEPS:
                    found.append(f"{where}: the shared steps import no surface")
            if other == "recorder" and unit not in ONLY_THESE_REACH_THE_RECORDER:
                found.append(f"{where}: only the fixture and the CLI load the recorder")
    found.extend(f"a circle between the mock's folders and modules: {' → '.join(c)}" for c in _cycles(edges))
    return found


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    def back(node: str, goal: str, seen: set[str]) -> list[str]:
        for nxt in sorted(edges.get(node, ())):
            if nxt == goal:
                return [nxt]
            if nxt not in seen:
                seen.add(nxt)
                if rest := back(nxt, goal, seen):
                    return [nxt, *rest]
        return []

    return [[start, *c] for start in sorted(edges) if (c := back(start, start, set()))][:1]


def test_the_mocks_folders_import_only_what_their_readmes_allow():
    assert folder_violations(ROOT) == []


def test_every_folder_of_the_mock_has_a_readme_saying_what_it_may_import():
    for folder in (*ORDER, "recorder"):
        text = (ROOT / "mockprovider" / folder / "README.md").read_text()
        assert "**May import:**" in text and "**Must never import:**" in text, folder


def test_the_test_tree_mirrors_the_mocks_folders():
    folders = {p.name for p in (ROOT / "mockprovider").iterdir() if (p / "__init__.py").is_file()}
    tests = {p.name for p in Path(__file__).parent.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders == tests


def _planted(tmp_path: Path, file: str, line: str, *more: tuple[str, str]) -> list[str]:
    shutil.copytree(ROOT / "mockprovider", tmp_path / "mockprovider",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in ((file, line), *more):
        target = tmp_path / "mockprovider" / name
        target.write_text(target.read_text() + f"\n{text}\n")
    return folder_violations(tmp_path)


def test_a_script_that_imports_a_surface_is_refused(tmp_path):
    found = _planted(tmp_path, "scripts/scenarios.py", "from mockprovider.apis import chat")
    assert any("scripts/ may import only" in f for f in found) and any("circle" in f for f in found)


def test_a_surface_that_imports_another_is_refused(tmp_path):
    found = _planted(tmp_path, "apis/ollama.py", "from mockprovider.apis.gemini import ROUTES")
    assert found == ["mockprovider/apis/ollama.py imports mockprovider.apis.gemini: a surface imports "
                     "only the shared steps, never another surface"]


def test_a_reply_reading_a_surface_or_the_journal_is_refused(tmp_path):
    found = _planted(tmp_path, "replies/caching.py", "import mockprovider.journal")
    assert found == ["mockprovider/replies/caching.py imports mockprovider.journal: replies/ may import only "
                     "['errors', 'metrics', 'offload', 'reading', 'scripts']"]


def test_a_surface_reaching_another_through_its_folders_init_is_refused(tmp_path):
    found = _planted(tmp_path, "apis/__init__.py", "from mockprovider.apis.gemini import ROUTES as GEMINI",
                     ("apis/ollama.py", "from mockprovider.apis import GEMINI"))
    assert found == ["mockprovider/apis/ollama.py imports mockprovider.apis: a surface imports "
                     "only the shared steps, never another surface"]


README_NAMES = {"re2": "google-re2", "o200k": "`o200k`", "starlette": "starlette", "httpx": "httpx",
                "uvicorn": "uvicorn", "anyio": "anyio"}
"""How a README names a package outside the mock that a folder imports."""


def unnamed_imports(root: Path, folder: str) -> list[str]:
    """What `folder`'s modules import, outside the standard library and the mock's folders, that
    its README's "May import" does not name (a top-level module of the mock as `mockprovider.x`)."""
    text = (root / "mockprovider" / folder / "README.md").read_text()
    allowed = text.split("**May import:**")[1].split("**Must never import:**")[0]
    names: set[str] = set()
    for path in (root / "mockprovider" / folder).rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names.add(node.module or "")
    unnamed = []
    for name in sorted(names):
        top, _, rest = name.partition(".")
        if top in sys.stdlib_module_names or top == "__future__":
            continue
        if top == "mockprovider":
            first = rest.split(".")[0]
            if first in (*ORDER, "recorder") or f"`mockprovider.{first}`" in allowed:
                continue
        elif README_NAMES.get(top, top) in allowed:
            continue
        unnamed.append(f"{folder}: {name}")
    return unnamed


def test_each_folders_readme_names_everything_the_folder_imports():
    assert [u for folder in (*ORDER, "recorder") for u in unnamed_imports(ROOT, folder)] == []


def test_an_import_a_readme_does_not_name_is_seen(tmp_path):
    _planted(tmp_path, "replies/faults.py", "import httpx")
    assert "replies: httpx" in unnamed_imports(tmp_path, "replies")


def test_a_folder_importing_the_whole_package_is_refused(tmp_path):
    # `import mockprovider` runs its __init__ (the app, the server) and reaches every module by name.
    found = _planted(tmp_path, "reading/memo.py", "import mockprovider")
    assert found == [
        "mockprovider/reading/memo.py imports mockprovider.__init__: reading/ may import only "
        "['errors', 'journal', 'offload', 'scripts']",
        "a circle between the mock's folders and modules: __init__ → app → apis → reading → __init__",
    ]

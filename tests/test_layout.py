"""The import rules each package's README states, checked on the source.

A rule here is a README claim ("must never import ..."): every `import` in a file counts, at module
level or inside a function, except under `if TYPE_CHECKING:`. Cycles are checked among all of them:
a lazy import inside a function (how a command loads a heavy part on demand, `harness ui`) cannot
deadlock an import, but two modules that need each other still cannot be read or moved alone.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from source_support import parsed

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("mockprovider", "harness", "o200k", "exitkit")
OURS = {*SHIPPED, "experiments"}
FRAMEWORKS = {"agents", "pydantic_ai", "langgraph", "langchain_openai", "langchain_core", "smolagents",
              "llama_index", "autogen_agentchat", "autogen_core", "autogen_ext", "agno", "strands", "crewai",
              "google", "semantic_kernel"}
WEB = {"starlette", "uvicorn"}
PLOTS = {"pandas", "matplotlib", "numpy"}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_ours(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@functools.cache  # the rules ask about the same files many times; the tree does not change
def imports(path: Path, *, module_level_only: bool = False) -> frozenset[str]:
    """Absolute names of the modules `path` imports."""
    tree = parsed(path)
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(node)}
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    found: set[str] = set()
    for node in tree.body if module_level_only else ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the file's own package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from a import b` is `a.b` when b is a module of ours (a's own code then adds no edge)
            found.update(f"{base}.{a.name}" if _is_ours(f"{base}.{a.name}") else base for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return frozenset(found)


def files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def tops(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


def violations(package: str, forbidden: set[str], *, skip=lambda path: False) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {sorted(tops(imports(path)) & forbidden)}"
            for path in files(package) if not skip(path) and tops(imports(path)) & forbidden]


def _under(*folders: str):
    return lambda path: any(path.relative_to(ROOT).as_posix().startswith(f"{f}/") for f in folders)


def test_the_harness_never_imports_the_mock_the_lab_the_kit_or_a_web_stack_outside_its_ui():
    assert violations("harness", {"mockprovider", "experiments", "exitkit", *WEB},
                      skip=_under("harness/ui")) == []
    assert violations("harness", {"mockprovider", "experiments", "exitkit"}) == []


def test_only_the_cli_reaches_the_harness_ui_and_the_core_never_imports_the_chapter():
    outside_ui = [p for p in files("harness") if not _under("harness/ui")(p)]
    reach_ui = {p.name for p in outside_ui if any(n.startswith("harness.ui") for n in imports(p))}
    assert reach_ui <= {"cli.py"}
    # At import time the CLI loads only the command's argument parser, which loads no web stack.
    cli = {n for n in imports(ROOT / "harness/cli.py", module_level_only=True) if n.startswith("harness.ui")}
    assert cli <= {"harness.ui", "harness.ui.options"}
    assert not tops(imports(ROOT / "harness/ui/options.py", module_level_only=True)) & WEB
    core = [p for p in outside_ui if p.name not in ("cli.py", "wiring.py", "chapter.py")]
    assert [p.name for p in core if "harness.chapter" in imports(p)] == []


def test_the_mock_never_imports_the_harness_the_lab_the_kit_or_a_plotting_stack():
    assert violations("mockprovider", {"harness", "experiments", "exitkit", *PLOTS}) == []


def test_the_token_formula_imports_nothing_of_this_repository():
    assert violations("o200k", OURS - {"o200k"}) == []


def test_the_kit_core_imports_no_framework_harness_or_lab_and_plots_only_in_its_report():
    assert violations("exitkit", {"harness", "experiments", *FRAMEWORKS, *PLOTS},
                      skip=lambda p: _under("exitkit/adapters")(p) or p.name == "report.py") == []
    assert not tops(imports(ROOT / "exitkit/report.py")) & {"harness", "experiments", *FRAMEWORKS}
    assert not tops(imports(ROOT / "exitkit/report.py", module_level_only=True)) & PLOTS
    assert violations("exitkit", {"experiments", "pandas"}) == []


def test_the_shipped_packages_never_import_the_lab():
    # The wheel does not ship `experiments`: an import of it would fail in every user's install.
    for package in SHIPPED:
        assert violations(package, {"experiments"}) == []


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    def path(node: str, goal: str, seen: set[str]) -> list[str]:
        for nxt in sorted(graph[node]):
            if nxt == goal:
                return [nxt]
            if nxt not in seen:
                seen.add(nxt)
                if rest := path(nxt, goal, seen):
                    return [nxt, *rest]
        return []

    for start in sorted(graph):
        if found := path(start, start, set()):
            return [start, *found]
    return []


@pytest.mark.parametrize("package", SHIPPED)
def test_no_import_cycle_between_modules_not_even_through_a_deferred_import(package):
    # A deferred import (inside a function) breaks a cycle only at import time: the modules
    # still need each other, and neither can be read, tested or moved alone.
    modules = {_module(p): p for p in files(package)}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {m: {o for n in imports(p) if (o := owner(n)) and o != m} for m, p in modules.items()}
    assert _cycle(graph) == []


def test_the_packages_depend_on_each_other_in_one_direction():
    graph = {package: tops(set().union(*(imports(p) for p in files(package)))) & OURS - {package}
             for package in OURS}
    assert _cycle(graph) == []
    assert graph["o200k"] == set() and graph["mockprovider"] == {"o200k"}


def test_the_rules_see_the_imports_they_forbid():
    # The checks above pass on an empty import set too: pin that the parser finds real imports.
    assert "harness.ui.serve" in imports(ROOT / "harness/cli.py")
    assert "harness.ui.serve" not in imports(ROOT / "harness/cli.py", module_level_only=True)
    assert "harness" in tops(imports(ROOT / "exitkit/adapters/ours.py"))
    assert "mockprovider" in tops(imports(ROOT / "exitkit/runner.py"))
    assert "matplotlib" in tops(imports(ROOT / "exitkit/report.py"))


def _is_sys_path(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys"


def _edits_sys_path(path: Path) -> bool:
    """A method call on `sys.path` (insert, append, ...) or an assignment to it."""
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Call) and _is_sys_path(getattr(node.func, "value", None)):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(node, ast.Assign | ast.AugAssign) and any(_is_sys_path(t) for t in targets):
            return True
    return False


@pytest.mark.parametrize("package", sorted(OURS))
def test_no_module_edits_sys_path(package):
    # An import that only works after a path edit works from one folder and breaks in the wheel.
    assert [p.relative_to(ROOT).as_posix() for p in files(package) if _edits_sys_path(p)] == []


def test_the_sys_path_check_sees_an_edit(tmp_path):
    # One file per snippet: a file's parsed tree is kept for the session.
    for i, code in enumerate(("import sys\nsys.path.insert(0, 'x')\n", "import sys\nsys.path += ['x']\n",
                              "import sys\nsys.path = []\n")):
        (tmp_path / f"m{i}.py").write_text(code)
        assert _edits_sys_path(tmp_path / f"m{i}.py"), code
    (tmp_path / "reads.py").write_text("import os, sys\nos.environ['PYTHONPATH'] = ':'.join(sys.path)\n")
    assert not _edits_sys_path(tmp_path / "reads.py")


def _imports_a_conftest(path: Path) -> bool:
    """Whether `path` imports a module named `conftest`: with several test folders, which of their
    conftests that name finds depends on what a test worker happened to load first."""
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        if any(name.split(".")[0] == "conftest" for name in names):
            return True
    return False


def test_no_test_imports_a_conftest_by_name():
    tests = sorted((ROOT / "tests").rglob("*.py"))
    assert [p.relative_to(ROOT).as_posix() for p in tests if _imports_a_conftest(p)] == []


def test_the_conftest_check_sees_an_import(tmp_path):
    (tmp_path / "by_name.py").write_text("def test():\n    from conftest import HERE\n")
    (tmp_path / "neighbour.py").write_text("from source_support import parsed\n")
    assert _imports_a_conftest(tmp_path / "by_name.py")
    assert not _imports_a_conftest(tmp_path / "neighbour.py")

"""The house rule: no function over 60 lines in any package, subpackages included (rglob)."""

import ast
from pathlib import Path

import pytest
from source_support import parsed

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60
# Every top-level package, found rather than listed, so a new one cannot slip past the rule.
PACKAGES = sorted(init.parent.name for init in ROOT.glob("*/__init__.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_is_longer_than_60_lines(package):
    long = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > LIMIT:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_rule_sees_every_package():
    assert {"harness", "mockprovider", "o200k", "exitkit", "experiments"} <= set(PACKAGES)


MODULE_LIMIT = 400


def test_no_module_of_the_mock_is_longer_than_400_lines():
    # The mock's folders keep a module to one job; past 400 lines a module holds two.
    long = [f"{p.relative_to(ROOT)} ({n} lines)" for p in sorted((ROOT / "mockprovider").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MODULE_LIMIT]
    assert long == []

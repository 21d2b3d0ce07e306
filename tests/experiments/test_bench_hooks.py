"""The lab's benchmarks (experiments/bench) reach the mock's internals through one module,
`mockprovider.bench_hooks`, and only for the names it lists: a rename inside the mock then fails
there, at import, naming what moved."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from mockprovider import bench_hooks
from mockprovider.reading import transcript

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = {"mockprovider", "mockprovider.server", "mockprovider.bench_hooks"}
"""What a user imports (docs show `mockprovider` and `mockprovider.server`), and the hooks."""
HOOKED = {module.__name__.rpartition(".")[2]: set(names) for module, names in bench_hooks.TIMED.items()}


def reaches(path: Path) -> list[str]:
    """The mock's modules `path` imports past the public ones, and the names it reads off a hook
    module (`transcript.read`, or `patched_batch(..., transcript, "read", ...)`) that
    bench_hooks does not list."""
    tree = ast.parse(path.read_text())
    found: list[str] = []
    hooks: dict[str, str] = {}  # the name a module is imported as -> its own name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mockprovider"):
            if node.module not in PUBLIC:
                found.append(node.module)
            if node.module == "mockprovider.bench_hooks":
                hooks |= {a.asname or a.name: a.name for a in node.names if a.name in HOOKED}
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
            found += [n for n in names if n.startswith("mockprovider") and n not in PUBLIC]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in hooks:
            if node.attr not in HOOKED[hooks[node.value.id]]:
                found.append(f"{hooks[node.value.id]}.{node.attr}")
        elif isinstance(node, ast.Call):
            for module, name in zip(node.args, node.args[1:], strict=False):
                if (isinstance(module, ast.Name) and module.id in hooks and isinstance(name, ast.Constant)
                        and name.value not in HOOKED[hooks[module.id]]):
                    found.append(f"{hooks[module.id]}.{name.value}")
    return found


def test_the_benchmarks_reach_the_mock_only_through_its_hooks():
    bench = sorted((ROOT / "experiments" / "bench").glob("*.py"))
    assert bench and {p: r for p in bench if (r := reaches(p))} == {}


def test_a_benchmark_reaching_past_the_hooks_is_seen(tmp_path):
    planted = tmp_path / "trick.py"
    planted.write_text("from mockprovider.reading import memo\n"
                       "from mockprovider.bench_hooks import transcript\n"
                       "from mockprovider.bench_hooks import body as reading_body\n"
                       "transcript.read\ntranscript._gone\npatch(transcript, 'also_gone', None)\n"
                       "reading_body._read_body\nreading_body._renamed\n")
    assert reaches(planted) == ["mockprovider.reading", "transcript._gone", "transcript.also_gone",
                                "body._renamed"]


def test_a_rename_inside_the_mock_fails_at_import_naming_what_moved(monkeypatch):
    monkeypatch.delattr(transcript, "_read_new")
    with pytest.raises(ImportError, match=r"mockprovider\.reading\.transcript\._read_new no longer exist"):
        importlib.reload(bench_hooks)

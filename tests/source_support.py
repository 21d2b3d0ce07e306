"""The repository's own source, parsed once per session for the tests that read its shape
(import rules, function length, import cycles): each file's tree is shared, read-only."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of `path`; callers walk it and never change it."""
    return ast.parse(path.read_text())

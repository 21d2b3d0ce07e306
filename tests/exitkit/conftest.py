"""One kit (a mock under uvicorn on a loopback port, wrapped in the kit's journal) per module."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exitkit.card import run_case
from exitkit.loader import declared, load
from exitkit.runner import Kit
from exitkit.verdict import Result

HERE = Path(__file__).parent
"""Children find `file_loop` and `broken_loops` here: the kit hands them the parent's sys.path."""


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kit]:
    with Kit.serve(tmp_path_factory.mktemp("exitkit")) as served:
        yield served


@pytest.fixture
def judge(kit: Kit) -> Callable[[str, str], Result]:
    """`judge(spec, case)`: run one case for one adapter spec and return its result."""

    def run(spec: str, case: str) -> Result:
        return run_case(kit, declared(spec, load(spec)), case, fast=True)

    return run

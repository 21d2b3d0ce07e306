"""Run an experiment's `measure()` against the session's mock, sharing one connection pool."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType
from typing import Any

import pytest

from experiments.lab.runs import Env
from harness import ModelClient


@pytest.fixture(scope="module")
def env(mock_url, tmp_path_factory) -> Env:
    return Env(base_url=mock_url, fast=True, workdir=tmp_path_factory.mktemp("experiments"))


@pytest.fixture(scope="module")
def measure(env: Env) -> Callable[..., Any]:
    """`measure(module, **knobs)` runs `module.measure(env, **knobs)` to completion (`env=` overrides)."""

    def run(module: ModuleType, *, env: Env = env, **knobs: Any) -> Any:
        async def go():
            async with ModelClient(env.base_url) as client:
                return await module.measure(replace(env, client=client), **knobs)

        return asyncio.run(go())

    return run

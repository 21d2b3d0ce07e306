"""A kit tool as a plain Python function, for frameworks that build a tool from one.

Agno, Strands, smolagents, CrewAI, Google ADK, LlamaIndex and Semantic Kernel read a tool's
name from `__name__`, its description and each argument's from a Google-style docstring, and
its argument types from the signature. `as_function` gives them exactly that, from the tool's
JSON schema; `as_blocking` does the same for a framework that calls its tools synchronously,
from a worker thread, running each call on the job's event loop so Stop still cancels it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool,
                               "array": list, "object": dict}


def _signature(parameters: dict[str, Any]) -> inspect.Signature:
    required = set(parameters.get("required", ()))
    params = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=JSON_TYPES.get(spec.get("type"), str),
                                default=inspect.Parameter.empty if name in required else None)
              for name, spec in parameters.get("properties", {}).items()]
    # Required arguments first: Python refuses a required one after one with a default.
    params.sort(key=lambda p: p.default is not inspect.Parameter.empty)
    return inspect.Signature(params, return_annotation=str)


def _docstring(description: str, parameters: dict[str, Any]) -> str:
    args = [f"    {name}: {spec.get('description') or name}"
            for name, spec in parameters.get("properties", {}).items()]
    return description + ("\n\nArgs:\n" + "\n".join(args) + "\n" if args else "")


def _named(function: Any, name: str, description: str, parameters: dict[str, Any]) -> Any:
    signature = _signature(parameters)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = _docstring(description, parameters)
    function.__signature__ = signature
    function.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()} | {"return": str}
    return function


def as_function(name: str, description: str, parameters: dict[str, Any],
                call: Callable[..., Awaitable[str]]) -> Callable[..., Awaitable[str]]:
    signature = _signature(parameters)

    async def tool(*args: Any, **kwargs: Any) -> str:
        return await call(**signature.bind(*args, **kwargs).arguments)

    return _named(tool, name, description, parameters)


class ToolCancelled(Exception):
    """Raised in the worker thread by a blocking tool that Stop cancelled."""


def as_blocking(name: str, description: str, parameters: dict[str, Any],
                call: Callable[..., Awaitable[str]],
                unless_stopped: Callable[[Awaitable[str]], Awaitable[str | None]]) -> Callable[..., str]:
    loop = asyncio.get_running_loop()
    signature = _signature(parameters)

    def tool(*args: Any, **kwargs: Any) -> str:
        work = unless_stopped(call(**signature.bind(*args, **kwargs).arguments))
        result = asyncio.run_coroutine_threadsafe(work, loop).result()
        if result is None:
            raise ToolCancelled(f"{name} was cancelled: the user pressed Stop")
        return result

    return _named(tool, name, description, parameters)

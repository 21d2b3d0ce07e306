"""`MODULE:ATTRIBUTE` to an adapter object, checked against the contract before any case runs."""

from __future__ import annotations

import inspect
from importlib import import_module
from typing import Any

from exitkit.contract import LIMIT_NAMES, Declared


class AdapterError(ValueError):
    """The spec does not name a usable adapter; the message says what is missing."""


def load(spec: str) -> Any:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise AdapterError(f"adapter spec must be MODULE:ATTRIBUTE, got {spec!r}")
    try:
        module = import_module(module_name)
    except ImportError as e:
        raise AdapterError(f"cannot import {module_name!r} for adapter {spec!r}: {e}") from e
    except Exception as e:  # a module failing as it loads (a missing key, a syntax error): a bad spec too
        raise AdapterError(f"importing {module_name!r} raised {type(e).__name__}: {e}") from e
    obj: Any = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise AdapterError(f"{module_name!r} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    if inspect.isclass(obj):
        try:
            obj = obj()
        except Exception as e:  # a class that needs arguments, or fails as it starts: a bad spec too
            raise AdapterError(f"making {spec!r} raised {type(e).__name__}: {e}") from e
    try:
        _check(spec, obj)
    except AdapterError:
        raise
    except Exception as e:  # a `name` or `limits` property that raises as it is read
        raise AdapterError(f"reading adapter {spec!r} raised {type(e).__name__}: {e}") from e
    return obj


def _check(spec: str, adapter: Any) -> None:
    if not isinstance(getattr(adapter, "name", None), str) or not adapter.name:
        raise AdapterError(f"adapter {spec!r} needs a `name` (a non-empty string)")
    limits = getattr(adapter, "limits", None)
    check_limits(spec, limits, resumes=False)
    if not inspect.iscoroutinefunction(getattr(adapter, "run", None)):
        raise AdapterError(f"adapter {spec!r} needs `async def run(self, job)`")
    wants_resume = {"resume", "approval"} & set(limits)
    if wants_resume and not inspect.iscoroutinefunction(getattr(adapter, "resume", None)):
        raise AdapterError(f"adapter {spec!r} declares {sorted(wants_resume)} but has no "
                           "`async def resume(self, job, decision)`")
    check_limits(spec, limits)


def check_limits(spec: str, limits: Any, *, resumes: bool = True) -> None:
    """The declared limits (a Python adapter's `limits`, a command's `describe` line): known names
    only and, with `resumes`, `approval` only beside `resume`."""
    if not isinstance(limits, (set, frozenset, tuple, list)) or not all(isinstance(n, str) for n in limits):
        raise AdapterError(f"adapter {spec!r} needs `limits`: a set of {', '.join(LIMIT_NAMES)}")
    if unknown := set(limits) - set(LIMIT_NAMES):
        raise AdapterError(f"adapter {spec!r} declares unknown limits {sorted(unknown)}; known: "
                           f"{', '.join(LIMIT_NAMES)}")
    # Else the approval cases would say "none exists".
    if resumes and "approval" in limits and "resume" not in limits:
        raise AdapterError(f"adapter {spec!r} declares 'approval' without 'resume': the kit approves a "
                           "call in a new process, through `resume`; declare both, or neither")


def declared(spec: str, adapter: Any) -> Declared:
    return Declared(spec=spec, name=adapter.name, limits=frozenset(adapter.limits))

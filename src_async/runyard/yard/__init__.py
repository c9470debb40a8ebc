"""Yard: a state store, a work queue and an execution store opened together from one URL.

``Yard.from_url()`` with no URL opens ``RUNYARD_URL``, else ``sqlite:///runyard.db``. The
classes are imported on first use (this package also holds the non-I/O URL parsing that the
adapters import while they load).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runyard.yard.urls import DEFAULT_URL, URL_VARIABLE, YardTarget, default_url, parse_url

if TYPE_CHECKING:
    from runyard._async.yard import AsyncYard
    from runyard._sync.yard import Yard

__all__ = [
    "DEFAULT_URL",
    "URL_VARIABLE",
    "AsyncYard",
    "Yard",
    "YardTarget",
    "default_url",
    "parse_url",
]

_LAZY = {"AsyncYard": "runyard._async.yard", "Yard": "runyard._sync.yard"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'runyard.yard' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value

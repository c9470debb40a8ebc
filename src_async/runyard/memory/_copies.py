"""Copies of stored JSON and records, so no caller of the memory stores shares mutable state."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel

from runyard._json import fresh_json
from runyard.models import (
    DeadLetter,
    Lease,
    RunPage,
    RunRecord,
    SessionRecord,
    WorkItem,
)

__all__ = ["detached", "fresh_model"]


P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def _fresh(value: Any) -> Any:
    # Through JSON text, not copy.deepcopy: the stored value passed dump_json, and deepcopy
    # ran out of stack on nestings it accepts (a run stored, then every read of it raised).
    return fresh_json(value) if isinstance(value, (dict, list)) else value


# The fields that hold a JSON value a store accepted (dump_json checked them).
JSON_FIELDS = frozenset({"blob", "context", "data", "payload"})


def fresh_model(model: M) -> M:
    """A copy of ``model`` that shares no mutable value with it: its JSON fields copied through
    their text, its nested models likewise, any other dict, list or set by ``copy.deepcopy``
    (a subclass's own fields: a date or an int key stays what it was). Not
    ``model_copy(deep=True)`` for the JSON: deepcopy ran out of stack on nestings dump_json
    accepts (an execution saved 500 deep could never be loaded)."""
    update: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            update[name] = fresh_model(value)
        elif name in JSON_FIELDS:
            update[name] = _fresh(value)
        elif isinstance(value, (dict, list, set)):
            update[name] = copy.deepcopy(value)
    return model.model_copy(update=update)


def _detach(value: Any) -> Any:
    """A copy of a returned record that shares no mutable JSON with the stored one.

    Only the JSON fields (blob, payload) can be mutated by a caller; the rest of each model is
    frozen and immutable, so a shallow copy with a fresh JSON field is enough (and several
    times cheaper than a deep model copy on this hot path).
    """
    if isinstance(value, (RunRecord, SessionRecord)):
        return value.model_copy(update={"blob": _fresh(value.blob)})
    if isinstance(value, WorkItem):
        return value.model_copy(update={"payload": _fresh(value.payload)})
    if isinstance(value, (Lease, DeadLetter)):
        return value.model_copy(update={"item": _detach(value.item)})
    if isinstance(value, RunPage):
        return value.model_copy(update={"items": [_detach(r) for r in value.items]})
    if isinstance(value, list):
        return [_detach(v) for v in value]
    return value


def detached(method: Callable[P, T]) -> Callable[P, T]:
    """Return deep copies of what ``method`` returns, so no caller can change stored state
    (what Redis and PostgreSQL give by construction)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return _detach(method(*args, **kwargs))  # type: ignore[no-any-return]

    return wrapper

"""What a SQLite store's ``open`` and ``__init__`` check of their keyword options before
anything is opened, shared by both twins (no I/O)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from runyard.errors import ConfigurationError
from runyard.executions.planning import check_trace_max
from runyard.policy import QueuePolicy
from runyard.sqlite.schema import check_tables

__all__ = ["check_store_options"]

# What open() passes to __init__ itself: never an option of the caller's.
_OPEN_OWN = frozenset({"connection", "close_connection", "busy_timeout_seconds"})


def init_options(cls: type) -> frozenset[str]:
    """The keyword options the ``__init__``s of ``cls``'s MRO take (a subclass's own
    included), but the connection and those ``open`` passes itself."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        for parameter in list(inspect.signature(init).parameters.values())[1:]:
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
                names.add(parameter.name)
    return frozenset(names - _OPEN_OWN)


def check_store_options(cls: type, options: Mapping[str, Any]) -> None:
    """ConfigurationError naming the option (InvalidArgumentError for ``trace_max``, as the
    other execution stores) for one ``cls.__init__`` would refuse: an unknown name, a
    ``tables`` that is not a SqliteTables, a ``max_value_bytes`` that is not a positive int,
    a ``policy`` that is not a QueuePolicy. Only the options given are looked at."""
    taken = init_options(cls)
    unknown = sorted(set(options) - taken)
    if unknown:
        raise ConfigurationError(
            f"{cls.__name__} takes no option {unknown[0]!r}; its options are "
            f"{', '.join(sorted(taken))} (and open()'s own: create_schema, durable, "
            "busy_timeout_seconds)",
            fields=tuple(unknown),
        )
    check_tables(options.get("tables"))
    if "max_value_bytes" in options:
        value = options["max_value_bytes"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(
                f"max_value_bytes must be a positive int, not {value!r}",
                fields=("max_value_bytes",),
            )
    policy = options.get("policy")
    if policy is not None and not isinstance(policy, QueuePolicy):
        raise ConfigurationError(
            f"policy must be a runyard.QueuePolicy (or None for the default), not "
            f"{type(policy).__name__}",
            fields=("policy",),
        )
    if "trace_max" in options:
        check_trace_max(options["trace_max"])

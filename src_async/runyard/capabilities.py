"""What a store declares it can do, and the check that its methods can really do it."""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, fields
from typing import Literal

from runyard.errors import StoreCapabilityError

__all__ = ["Deployment", "StoreCapabilities", "certify", "validate_capabilities"]

Deployment = Literal["single_process", "single_host", "multi_server"]


@dataclass(frozen=True)
class StoreCapabilities:
    """A store class's declaration; nothing is inferred from method names alone.

    - ``fenced_writes``: writes take a fence (state ``fence=``, queue ``token=``).
    - ``retry_ids``: writes take a caller-minted identity that makes a retry safe.
    - ``transactional``: ``bound(session)`` joins the caller's open transaction.
    - ``atomic_settle``: complete/fail are one atomic, fenced step.
    - ``recovery``: ``reap``/``adopt`` recover work from crashed workers.
    - ``event_log``: each run has an append-only log (``append_event`` with a retry identity
      and a fence, ``read_events``, ``follow``); see docs/events.md.
      The store also declares ``terminal_statuses`` (a non-empty set of statuses that end a
      follow).
    - ``atomic_finalize``: ``finalize`` sets a terminal status and appends the terminal event
      in one atomic write; requires ``event_log``.
    - ``batched_operations``: ``enqueue_many``, ``claim_many(worker, limit=)``,
      ``heartbeat_many``, ``complete_many`` and ``release_many``, one round trip each, with
      per-item outcomes; see docs/protocols.md.
    - ``deployment``: where the store's guarantees hold.
    """

    version: int = 1
    fenced_writes: bool = False
    retry_ids: bool = False
    transactional: bool = False
    atomic_settle: bool = False
    recovery: bool = False
    event_log: bool = False
    atomic_finalize: bool = False
    batched_operations: bool = False
    deployment: Deployment | None = None

    def __post_init__(self) -> None:
        if self.version != 1:
            raise ValueError(f"unknown capabilities version {self.version}; this runyard knows 1")
        if self.deployment not in (None, "single_process", "single_host", "multi_server"):
            raise ValueError(f"unknown deployment {self.deployment!r}")
        if self.atomic_finalize and not self.event_log:
            raise ValueError(
                "atomic_finalize=True requires event_log=True: finalize appends the terminal "
                "event to the run's event log"
            )


# capability -> kind of store -> (method, keyword parameters it must accept)
_REQUIREMENTS: dict[str, dict[str, tuple[tuple[str, tuple[str, ...]], ...]]] = {
    "fenced_writes": {
        "state": (("put_run", ("fence",)), ("patch_run", ("fence",)), ("delete_run", ("fence",))),
        "queue": (("heartbeat", ("token",)), ("complete", ("token",)), ("fail", ("token",))),
    },
    "retry_ids": {
        "state": (("put_run", ("expected_version",)),),
        "queue": (("enqueue", ("item_id", "dedupe_key")),),
        "executions": (("commit", ("processed_event_id",)),),
    },
    "transactional": {
        "state": (("bound", ()),),
        "queue": (("bound", ()),),
        "executions": (("bound", ()),),
    },
    "atomic_settle": {
        "state": (),
        "queue": (("complete", ("token",)), ("fail", ("token", "retryable"))),
    },
    "recovery": {
        "state": (("acquire_lease", ("ttl_seconds",)),),
        "queue": (("reap", ("limit",)), ("adopt", ("worker",))),
    },
    "event_log": {
        "state": (
            ("append_event", ("event_id", "fence")),
            ("read_events", ("after", "limit")),
            ("follow", ("after", "poll_seconds")),
        ),
    },
    "atomic_finalize": {
        "state": (
            (
                "finalize",
                ("status", "event_type", "event_data", "expected_version", "fence", "event_id"),
            ),
        ),
    },
    "batched_operations": {
        "queue": (
            ("enqueue_many", ()),
            ("claim_many", ("limit",)),
            ("heartbeat_many", ()),
            ("complete_many", ()),
            ("release_many", ()),
        ),
    },
}


def _kind(store: object) -> str:
    if hasattr(store, "commit") and hasattr(store, "pending_outbox"):
        return "executions"
    if hasattr(store, "claim"):
        return "queue"
    if hasattr(store, "put_run"):
        return "state"
    return "other"


def validate_capabilities(store: object) -> StoreCapabilities:
    """Check ``store``'s declared capabilities against its methods and return the declaration.

    Raises StoreCapabilityError naming the capability, the method, the missing keyword
    parameters and the repair. Warns (DeprecationWarning) when no ``deployment`` is declared.
    """
    caps = getattr(store, "capabilities", None)
    name = type(store).__name__
    if not isinstance(caps, StoreCapabilities):
        raise StoreCapabilityError(
            "capabilities",
            name,
            ("capabilities",),
            "declare `capabilities = StoreCapabilities(version=1, ..., deployment=...)` "
            "on the store class",
            message=f"{name} declares no capabilities: declare `capabilities = "
            "StoreCapabilities(version=1, ..., deployment=...)` on the store class "
            "(method names alone enable nothing)",
        )
    if caps.deployment is None:
        warnings.warn(
            f"{name}.capabilities declares no deployment; declare one of "
            "'single_process', 'single_host', 'multi_server' (required by the conformance kit)",
            DeprecationWarning,
            stacklevel=2,
        )
    kind = _kind(store)
    for f in fields(caps):
        if f.name not in _REQUIREMENTS or not getattr(caps, f.name):
            continue
        for method_name, params in _REQUIREMENTS[f.name].get(kind, ()):
            method = getattr(store, method_name, None)
            if method is None:
                raise StoreCapabilityError(
                    f.name,
                    f"{name}.{method_name}",
                    params or ("(the method itself)",),
                    f"implement {method_name}() or stop declaring {f.name}=True",
                    message=f"capability {f.name!r} is declared but {name} has no "
                    f"{method_name}() method: implement {method_name}() or stop declaring "
                    f"{f.name}=True",
                )
            missing = _missing_keywords(method, params)
            if missing:
                wanted = ", ".join(f"{p}=..." for p in missing)
                raise StoreCapabilityError(
                    f.name,
                    f"{name}.{method_name}",
                    missing,
                    f"add keyword parameter(s) {wanted} to {method_name}() "
                    f"or stop declaring {f.name}=True",
                )
    if caps.event_log and kind == "state":
        _check_terminal_statuses(store, name)
    return caps


def _check_terminal_statuses(store: object, name: str) -> None:
    """Raise StoreCapabilityError unless ``store.terminal_statuses`` is a non-empty set of
    strings (the statuses that end a follow)."""
    statuses = getattr(store, "terminal_statuses", None)
    if (
        isinstance(statuses, (set, frozenset))
        and statuses
        and all(isinstance(s, str) for s in statuses)
    ):
        return
    repair = (
        "declare `terminal_statuses = runyard.events.TERMINAL_STATUSES` (or another non-empty "
        "frozenset of statuses) on the store, or stop declaring event_log=True"
    )
    raise StoreCapabilityError(
        "event_log",
        f"{name}.terminal_statuses",
        ("terminal_statuses",),
        repair,
        message=f"capability 'event_log' is declared but {name} has no usable "
        f"terminal_statuses (found {statuses!r}): {repair}",
    )


def _missing_keywords(method: object, params: tuple[str, ...]) -> tuple[str, ...]:
    try:
        signature = inspect.signature(method)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return params
    accepted = {
        p.name
        for p in signature.parameters.values()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return ()
    return tuple(p for p in params if p not in accepted)


def certify(store: object) -> StoreCapabilities:
    """Validate ``store`` for the conformance kit, which also requires a declared deployment.

    Raises StoreCapabilityError.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        caps = validate_capabilities(store)
    if caps.deployment is None:
        raise StoreCapabilityError(
            "deployment",
            type(store).__name__,
            ("deployment",),
            "the conformance kit certifies only a store that says where its guarantees hold: "
            "declare deployment='single_process', 'single_host' or 'multi_server'",
            message=f"{type(store).__name__}.capabilities declares no deployment; the "
            "conformance kit certifies only a store that says where its guarantees hold: "
            "declare deployment='single_process', 'single_host' or 'multi_server'",
        )
    return caps

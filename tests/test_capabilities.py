"""Capability declarations are checked against the methods that must honour them."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from runyard import AsyncMemoryStateStore, AsyncMemoryWorkQueue, MemoryStateStore, MemoryWorkQueue
from runyard.capabilities import StoreCapabilities, certify, validate_capabilities
from runyard.errors import StoreCapabilityError


class FencedButNoFence:
    capabilities = StoreCapabilities(fenced_writes=True, deployment="single_host")

    def put_run(self, key: Any, blob: Any, *, expected_version: int) -> None: ...

    def patch_run(self, key: Any, delta: Any, *, fence: int | None = None) -> None: ...

    def delete_run(self, key: Any, *, fence: int | None = None) -> None: ...


class QueueWithoutRecovery:
    capabilities = StoreCapabilities(recovery=True, deployment="multi_server")

    def claim(self, worker: str) -> None: ...

    def reap(self, *, limit: int = 100) -> None: ...


class NoDeployment:
    capabilities = StoreCapabilities(version=1)

    def put_run(self) -> None: ...


class MethodsButNoDeclaration:
    def put_run(self, key: Any, blob: Any, *, expected_version: int, fence: int) -> None: ...


@pytest.mark.parametrize(
    "store",
    [AsyncMemoryStateStore(), MemoryStateStore(), AsyncMemoryWorkQueue(), MemoryWorkQueue()],
)
def test_memory_twins_declare_single_process_and_validate(store: object) -> None:
    assert certify(store).deployment == "single_process"


def test_missing_keyword_is_named_with_the_repair() -> None:
    with pytest.raises(StoreCapabilityError) as caught:
        validate_capabilities(FencedButNoFence())
    err = caught.value
    assert (err.capability, err.method, err.missing) == (
        "fenced_writes",
        "FencedButNoFence.put_run",
        ("fence",),
    )
    assert "add keyword parameter(s) fence=..." in str(err)


def test_missing_method_is_named() -> None:
    with pytest.raises(
        StoreCapabilityError, match=r"QueueWithoutRecovery has no adopt\(\)"
    ) as caught:
        validate_capabilities(QueueWithoutRecovery())
    assert caught.value.method == "QueueWithoutRecovery.adopt"


def test_method_names_alone_enable_nothing() -> None:
    with pytest.raises(StoreCapabilityError, match="declare `capabilities"):
        validate_capabilities(MethodsButNoDeclaration())


def test_no_deployment_warns_and_the_kit_refuses_to_certify() -> None:
    with pytest.warns(DeprecationWarning, match="declares no deployment"):
        validate_capabilities(NoDeployment())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(StoreCapabilityError, match="conformance kit certifies only"):
            certify(NoDeployment())


def test_unknown_version_or_deployment_is_refused() -> None:
    with pytest.raises(ValueError, match="version 2"):
        StoreCapabilities(version=2)
    with pytest.raises(ValueError, match="deployment"):
        StoreCapabilities(deployment="everywhere")  # type: ignore[arg-type]


class _BatchedWithoutLimit:
    capabilities = StoreCapabilities(batched_operations=True, deployment="single_process")

    def claim(self, worker: str) -> None: ...

    def enqueue_many(self, tenant: str, items: list[Any]) -> None: ...

    def claim_many(self, worker: str, n: int) -> None: ...

    def heartbeat_many(self, leases: list[Any]) -> None: ...

    def complete_many(self, leases: list[Any]) -> None: ...

    def release_many(self, leases: list[Any]) -> None: ...


def test_batched_operations_need_claim_many_with_limit() -> None:
    with pytest.raises(StoreCapabilityError) as caught:
        validate_capabilities(_BatchedWithoutLimit())
    assert "batched_operations" in str(caught.value) and "limit" in str(caught.value)


def test_memory_queues_declare_batched_operations() -> None:
    for queue in (AsyncMemoryWorkQueue(), MemoryWorkQueue()):
        assert validate_capabilities(queue).batched_operations


class EventLog:
    """Declares event_log with every method it needs; subclasses take one piece away."""

    capabilities = StoreCapabilities(event_log=True, deployment="single_host")
    terminal_statuses: Any = frozenset({"completed"})

    def put_run(self) -> None: ...

    def append_event(
        self, key: Any, type: str, data: Any, *, event_id: Any, fence: Any
    ) -> None: ...

    def read_events(self, key: Any, *, after: int = 0, limit: int = 100) -> None: ...

    def follow(self, key: Any, *, after: int = 0, poll_seconds: Any = None) -> None: ...


class FollowWithoutPollSeconds(EventLog):
    def follow(self, key: Any, *, after: int = 0) -> None:  # type: ignore[override]
        ...


class NoTerminalStatuses(EventLog):
    terminal_statuses = None


class EmptyTerminalStatuses(EventLog):
    terminal_statuses = frozenset()


def test_an_event_log_that_validates() -> None:
    assert validate_capabilities(EventLog()).event_log


def test_event_log_needs_follow_with_poll_seconds() -> None:
    with pytest.raises(StoreCapabilityError) as caught:
        validate_capabilities(FollowWithoutPollSeconds())
    err = caught.value
    assert (err.capability, err.method, err.missing) == (
        "event_log",
        "FollowWithoutPollSeconds.follow",
        ("poll_seconds",),
    )


@pytest.mark.parametrize("store", [NoTerminalStatuses(), EmptyTerminalStatuses()])
def test_event_log_needs_terminal_statuses(store: object) -> None:
    with pytest.raises(StoreCapabilityError, match="terminal_statuses") as caught:
        validate_capabilities(store)
    assert (caught.value.capability, caught.value.missing) == ("event_log", ("terminal_statuses",))


class AppendWithoutEventId(EventLog):
    def append_event(self, key: Any, type: str, data: Any, *, fence: Any) -> None:  # type: ignore[override]
        ...


class AppendWithoutFence(EventLog):
    def append_event(self, key: Any, type: str, data: Any, *, event_id: Any) -> None:  # type: ignore[override]
        ...


class NoReadEvents(EventLog):
    read_events = None  # type: ignore[assignment]


class Finalizes(EventLog):
    capabilities = StoreCapabilities(event_log=True, atomic_finalize=True, deployment="single_host")

    def finalize(
        self,
        key: Any,
        *,
        status: str,
        event_type: str,
        event_data: Any,
        expected_version: Any = None,
        fence: Any = None,
        event_id: Any = None,
    ) -> None: ...


class FinalizeWithoutVersion(Finalizes):
    def finalize(  # type: ignore[override]
        self,
        key: Any,
        *,
        status: str,
        event_type: str,
        event_data: Any,
        fence: Any = None,
        event_id: Any = None,
    ) -> None: ...


class FinalizeWithoutFence(Finalizes):
    def finalize(  # type: ignore[override]
        self,
        key: Any,
        *,
        status: str,
        event_type: str,
        event_data: Any,
        expected_version: Any = None,
        event_id: Any = None,
    ) -> None: ...


class FinalizeWithoutEventId(Finalizes):
    def finalize(  # type: ignore[override]
        self,
        key: Any,
        *,
        status: str,
        event_type: str,
        event_data: Any,
        expected_version: Any = None,
        fence: Any = None,
    ) -> None: ...


class NoFinalize(EventLog):
    capabilities = StoreCapabilities(event_log=True, atomic_finalize=True, deployment="single_host")


@pytest.mark.parametrize(
    ("store", "capability", "method", "missing"),
    [
        (AppendWithoutEventId(), "event_log", "AppendWithoutEventId.append_event", ("event_id",)),
        (AppendWithoutFence(), "event_log", "AppendWithoutFence.append_event", ("fence",)),
        (
            FinalizeWithoutVersion(),
            "atomic_finalize",
            "FinalizeWithoutVersion.finalize",
            ("expected_version",),
        ),
        (FinalizeWithoutFence(), "atomic_finalize", "FinalizeWithoutFence.finalize", ("fence",)),
        (
            FinalizeWithoutEventId(),
            "atomic_finalize",
            "FinalizeWithoutEventId.finalize",
            ("event_id",),
        ),
    ],
)
def test_an_event_method_without_a_keyword_is_refused_naming_it(
    store: object, capability: str, method: str, missing: tuple[str, ...]
) -> None:
    with pytest.raises(StoreCapabilityError) as caught:
        validate_capabilities(store)
    err = caught.value
    assert (err.capability, err.method, err.missing) == (capability, method, missing)


@pytest.mark.parametrize("store", [NoReadEvents(), NoFinalize()])
def test_an_event_capability_without_its_method_is_refused(store: object) -> None:
    with pytest.raises(StoreCapabilityError) as caught:
        validate_capabilities(store)
    assert caught.value.capability == (
        "event_log" if isinstance(store, NoReadEvents) else "atomic_finalize"
    )


def test_a_finalize_with_every_keyword_validates() -> None:
    caps = validate_capabilities(Finalizes())
    assert caps.event_log and caps.atomic_finalize


def test_atomic_finalize_requires_event_log() -> None:
    with pytest.raises(ValueError, match="atomic_finalize=True requires event_log=True"):
        StoreCapabilities(atomic_finalize=True, deployment="single_host")
    assert StoreCapabilities(event_log=True, atomic_finalize=True).atomic_finalize

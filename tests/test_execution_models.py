"""The execution store's shared models refuse what no store could keep."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from runyard import AsyncMemoryExecutionStore, MemoryExecutionStore
from runyard.capabilities import StoreCapabilities, certify, validate_capabilities
from runyard.errors import InvalidArgumentError, StatePersistenceError, StoreCapabilityError
from runyard.executions import (
    DEFAULT_TRACE_MAX,
    Event,
    Execution,
    ExecutionPage,
    OutboxEntry,
    SpawnIntent,
    TimerOp,
    TraceEntry,
    TraceStep,
)
from runyard.executions.models import MAX_PATH_BYTES
from runyard.executions.planning import check_seconds, check_trace_max, plan_commit
from runyard.keys import InvalidIdentifierError
from runyard.models import RunKey


def test_default_trace_max_is_200() -> None:
    assert DEFAULT_TRACE_MAX == 200


def test_new_execution_starts_at_version_0_with_an_empty_context() -> None:
    exe = Execution(id="e1", definition_id="d")
    assert (exe.version, exe.status, exe.context, exe.root_path) == (0, "running", {}, "")
    assert exe.parent_id is None and exe.is_root
    assert exe.created_at is None and exe.updated_at is None


@pytest.mark.parametrize("field", ["id", "definition_id", "status", "parent_id"])
@pytest.mark.parametrize("bad", ["", "nul\x00", "x" * 300, 7])
def test_execution_refuses_bad_identifiers(field: str, bad: object) -> None:
    fields: dict[str, Any] = {"id": "e1", "definition_id": "d", field: bad}
    with pytest.raises(InvalidIdentifierError) as caught:
        Execution(**fields)
    assert caught.value.argument == field and not caught.value.retryable


def test_identifiers_in_models_are_refused_like_run_keys() -> None:
    # The same error type, and the same field naming, as RunKey("", ...) and the stores.
    with pytest.raises(InvalidIdentifierError) as key:
        RunKey("", "r")
    with pytest.raises(InvalidIdentifierError) as exe:
        Execution(id="", definition_id="d")
    assert (key.value.argument, exe.value.argument) == ("tenant", "id")
    exe_ok = Execution(id="e1", definition_id="d")
    with pytest.raises(InvalidIdentifierError) as assigned:
        exe_ok.status = ""
    assert assigned.value.argument == "status" and exe_ok.status == "running"
    with pytest.raises(InvalidIdentifierError):
        SpawnIntent(child_id="")
    # Other bad fields are still pydantic's ValidationError.
    with pytest.raises(ValidationError):
        Execution(id="e1", definition_id="d", version=-1)


def test_execution_cannot_be_its_own_parent() -> None:
    with pytest.raises(ValidationError, match="its own parent"):
        Execution(id="e1", definition_id="d", parent_id="e1")


def test_execution_refuses_a_negative_version_even_on_assignment() -> None:
    with pytest.raises(ValidationError):
        Execution(id="e1", definition_id="d", version=-1)
    exe = Execution(id="e1", definition_id="d")
    with pytest.raises(ValidationError):
        exe.version = -1
    exe.version = 4
    assert exe.version == 4


def test_execution_refuses_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        Execution(id="e1", definition_id="d", colour="blue")  # type: ignore[call-arg]


@pytest.mark.parametrize("bad", ["nul\x00", "p" * (MAX_PATH_BYTES + 1), 3])
def test_root_path_refuses_unstorable_paths(bad: object) -> None:
    with pytest.raises(ValidationError):
        Execution(id="e1", definition_id="d", root_path=bad)
    with pytest.raises(ValidationError):
        SpawnIntent(child_id="kid", root_path=bad)


def test_event_needs_an_id_and_a_name_and_is_frozen() -> None:
    event = Event(id="ev-1", name="tick", data={"n": 1})
    with pytest.raises(ValidationError):
        event.name = "other"
    with pytest.raises(InvalidIdentifierError):
        Event(id="", name="tick")
    with pytest.raises(InvalidIdentifierError):
        Event(id="ev", name="")


def test_outbox_seqs_start_at_1() -> None:
    with pytest.raises(ValidationError):
        OutboxEntry(seq=0, target_id="t", event=Event(id="e", name="n"))


def test_timer_op_constructors() -> None:
    assert TimerOp.schedule("wait", 10.5) == TimerOp(action="schedule", path="wait", fire_at=10.5)
    assert TimerOp.cancel("wait") == TimerOp(action="cancel", path="wait")


@pytest.mark.parametrize(
    "fields",
    [
        {"action": "schedule", "path": "wait"},
        {"action": "schedule", "path": "wait", "fire_at": float("nan")},
        {"action": "schedule", "path": "wait", "fire_at": float("inf")},
        {"action": "cancel", "path": "wait", "fire_at": 1.0},
        {"action": "schedule", "path": "", "fire_at": 1.0},
        {"action": "pause", "path": "wait", "fire_at": 1.0},
    ],
    ids=["no-fire-at", "nan", "inf", "cancel-with-fire-at", "empty-path", "unknown-action"],
)
def test_timer_op_refuses_inconsistent_fields(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TimerOp(**fields)


def test_trace_step_ids_are_optional_but_checked() -> None:
    assert TraceStep() == TraceStep(event_id=None, event_name=None, data=None)
    with pytest.raises(InvalidIdentifierError):
        TraceStep(event_id="")
    with pytest.raises(ValidationError):
        TraceEntry(index=0, recorded_at=1.0)


def test_page_defaults_to_no_cursor() -> None:
    assert ExecutionPage(items=[]).next_cursor is None


def test_plan_copies_so_the_caller_cannot_alias_the_store() -> None:
    exe = Execution(id="e1", definition_id="d", context={"list": [1]})
    event = Event(id="ev", name="n", data={"list": [2]})
    plan = plan_commit(exe, emits=[("t", event)])
    exe.context["list"].append(9)
    assert plan.execution.context == {"list": [1]}
    assert plan.emits[0][1].data is not event.data


@pytest.mark.parametrize(
    "kwargs",
    [
        {"emits": [Event(id="ev", name="n")]},
        {"emits": [("t", {"id": "ev"})]},
        {"timers": [("schedule", "wait", 1.0)]},
        {"spawns": ["kid"]},
        {"trace": {"event_name": "n"}},
    ],
    ids=["bare-event", "event-as-dict", "timer-tuple", "spawn-str", "trace-dict"],
)
def test_plan_refuses_elements_of_the_wrong_type(kwargs: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        plan_commit(Execution(id="e1", definition_id="d"), **kwargs)


def test_plan_refuses_a_self_spawn_and_oversized_values() -> None:
    exe = Execution(id="e1", definition_id="d")
    with pytest.raises(ValueError, match="cannot spawn itself"):
        plan_commit(exe, spawns=[SpawnIntent(child_id="e1")])
    big = Execution(id="e1", definition_id="d", context={"blob": "x" * 100})
    with pytest.raises(StatePersistenceError) as caught:
        plan_commit(big, max_value_bytes=50)
    assert caught.value.reason == "too_large"


def test_helper_checks() -> None:
    assert check_trace_max(5) == 5
    assert check_seconds(3, "now") == 3.0
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError):
            check_trace_max(bad)  # type: ignore[arg-type]
    # 2**1100 and 10**5000: a raw OverflowError from math.isfinite, on every backend.
    for bad_seconds in (float("nan"), True, "1", 2**1100, 10**5000):
        with pytest.raises(InvalidArgumentError) as caught:
            check_seconds(bad_seconds, "now")  # type: ignore[arg-type]
        assert caught.value.argument == "now" and len(str(caught.value)) < 200
    assert check_seconds(2**1023, "now") == float(2**1023)


# -- capability declarations of execution stores ---------------------------------------------
class ExecutionStoreWithoutBound:
    capabilities = StoreCapabilities(transactional=True, deployment="multi_server")

    def commit(self, exe: Execution, *, processed_event_id: str | None = None) -> None: ...

    def pending_outbox(self, limit: int = 100) -> None: ...


class ExecutionStoreWithoutDedupe:
    capabilities = StoreCapabilities(retry_ids=True, deployment="single_host")

    def commit(self, exe: Execution) -> None: ...

    def pending_outbox(self, limit: int = 100) -> None: ...


@pytest.mark.parametrize("store", [AsyncMemoryExecutionStore(), MemoryExecutionStore()])
def test_memory_execution_twins_declare_single_process(store: object) -> None:
    assert certify(store).deployment == "single_process"


def test_transactional_execution_store_needs_bound() -> None:
    with pytest.raises(StoreCapabilityError) as caught:
        validate_capabilities(ExecutionStoreWithoutBound())
    assert (caught.value.capability, caught.value.method) == (
        "transactional",
        "ExecutionStoreWithoutBound.bound",
    )


def test_retry_ids_on_an_execution_store_needs_processed_event_id() -> None:
    with pytest.raises(StoreCapabilityError) as caught:
        validate_capabilities(ExecutionStoreWithoutDedupe())
    assert caught.value.missing == ("processed_event_id",)

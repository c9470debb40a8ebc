"""Redis stores for the backend tests: a fresh namespace, no fsync, a ManualClock."""

from __future__ import annotations

from runyard import ManualClock
from runyard.executions import Event, Execution, SpawnIntent, TimerOp, TraceStep
from runyard.redis import AsyncRedisStateStore, AsyncRedisStore, RedisStoreSettings

from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

__all__ = ["execution_store_on", "fresh_settings", "full_commit", "state_store_on"]


def fresh_settings(**overrides: object) -> RedisStoreSettings:
    """Settings with a fresh namespace and ``durable=False`` (no fsync), then ``overrides``."""
    values: dict[str, object] = {"namespace": fresh_namespace(), "durable": False}
    values.update(overrides)
    return RedisStoreSettings(**values)  # type: ignore[arg-type]


def state_store_on(target: RedisTarget, clock: ManualClock | None = None) -> AsyncRedisStateStore:
    """A state store on ``target`` that owns its client; the caller closes it."""
    return AsyncRedisStateStore(
        AsyncClients.for_target(target),
        clock=clock or ManualClock(),
        settings=fresh_settings(),
        owns_client=True,
    )


def execution_store_on(target: RedisTarget, clock: ManualClock | None = None) -> AsyncRedisStore:
    """An execution store on ``target`` that owns its client; the caller closes it."""
    return AsyncRedisStore(
        AsyncClients.for_target(target),
        clock=clock or ManualClock(),
        settings=fresh_settings(),
        owns_client=True,
    )


def full_commit(exe: Execution) -> dict[str, object]:
    """The keywords of a commit of ``exe`` that writes every kind of entry (the full path)."""
    return {
        "emits": [("t1", Event(id="out-1", name="a")), ("t2", Event(id="out-2", name="b"))],
        "processed_event_id": "in-1",
        "timers": [TimerOp.schedule("wait", 1_700_000_000.0), TimerOp.cancel("old")],
        "spawns": [SpawnIntent(child_id=f"{exe.id}-kid", root_path="sub")],
        "trace": TraceStep(event_id="in-1", event_name="go", data={"n": 1}),
    }

"""A retried event_id whose data differs only in its text (Redis compares the canonical text,
then reads the stored entry to compare by value): the run deleted, or deleted and made again,
between the script's refusal and that read. Another client does it at that moment, on the real
server; the store under test is unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from runyard import RunKey, StateNotFoundError
from runyard.redis import RedisStateStore, RedisStoreSettings

from tests.support.redis_plugin import Clients, RedisTarget, fresh_namespace

KEY = RunKey("acme", "r")


@pytest.fixture
def stores(local_redis_target: RedisTarget) -> Iterator[tuple[RedisStateStore, RedisStateStore]]:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    with (
        RedisStateStore(Clients.for_target(local_redis_target), settings=settings) as a,
        RedisStateStore(Clients.for_target(local_redis_target), settings=settings) as b,
    ):
        yield a, b
    local_redis_target.purge(settings.namespace)


def _before_the_read(store: RedisStateStore, meanwhile: Callable[[], None]) -> None:
    """Run ``meanwhile`` once, after the script's refusal and before the stored entry is read."""
    read = store._stored_entry

    def racing(*args: Any, **kwargs: Any) -> Any:
        store._stored_entry = read  # type: ignore[method-assign]
        meanwhile()
        return read(*args, **kwargs)

    store._stored_entry = racing  # type: ignore[method-assign]


def test_a_run_made_again_meanwhile_gets_the_retried_event_under_its_own_id(
    stores: tuple[RedisStateStore, RedisStateStore],
) -> None:
    a, b = stores
    a.put_run(KEY, {}, expected_version=0)
    a.append_event(KEY, "tick", {"n": 1}, event_id="a")

    def remake() -> None:
        b.delete_run(KEY)
        b.put_run(KEY, {}, expected_version=0)
        b.append_event(KEY, "tick", {"n": 1}, event_id="b")

    _before_the_read(a, remake)
    event = a.append_event(KEY, "tick", {"n": 1.0}, event_id="a")
    # The entry at the refused seq is now "b"'s: it is not the retried event. The first version
    # wrote a second entry with "b"'s id and pointed "a" at it.
    assert (event.seq, event.event_id) == (2, "a")
    assert [(e.seq, e.event_id) for e in a.read_events(KEY)] == [(1, "b"), (2, "a")]
    assert a.append_event(KEY, "tick", {"n": 1}, event_id="a").seq == 2


def test_a_run_deleted_meanwhile_is_not_found(
    stores: tuple[RedisStateStore, RedisStateStore],
) -> None:
    a, b = stores
    a.put_run(KEY, {}, expected_version=0)
    a.append_event(KEY, "tick", {"n": 1}, event_id="a")
    _before_the_read(a, lambda: b.delete_run(KEY))
    # The first version raised EventConflictError: the data is the same by value.
    with pytest.raises(StateNotFoundError):
        a.append_event(KEY, "tick", {"n": 1.0}, event_id="a")

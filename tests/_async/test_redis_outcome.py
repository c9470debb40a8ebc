"""Runs and sessions on Redis: a lost request or reply is settled by the write's own id.

Both orders: the first send lands late (after the read-back found nothing) and the re-send
must not be told it conflicts with itself; the first send is lost while another writer wins
the same version with the same blob, and the caller must not be told it won.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from runyard import CounterDelta, RunKey
from runyard.errors import StateConflictError, StoreOutcomeUnknown
from runyard.redis import AsyncRedisStateStore, RedisStoreSettings

from tests.support.proxy import ReplyDroppingProxy, running_proxy
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

KEY = RunKey("acme", "r")


@pytest_asyncio.fixture
async def proxy(dedicated_redis_target: RedisTarget) -> AsyncIterator[ReplyDroppingProxy]:
    with running_proxy(dedicated_redis_target.port) as proxy:
        yield proxy


@pytest_asyncio.fixture
async def stores(
    proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> AsyncIterator[tuple[AsyncRedisStateStore, AsyncRedisStateStore]]:
    """(a store through the proxy, another writer on the server directly), one namespace."""
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    through = AsyncClients.for_target(RedisTarget("server", port=proxy.port))
    direct = AsyncClients.for_target(dedicated_redis_target)
    async with (
        AsyncRedisStateStore(through, settings=settings, owns_client=True) as store,
        AsyncRedisStateStore(direct, settings=settings, owns_client=True) as other,
    ):
        yield store, other


@pytest.mark.asyncio
async def test_a_put_run_that_lands_late_is_not_a_conflict_with_itself(
    stores: tuple[AsyncRedisStateStore, AsyncRedisStateStore], proxy: ReplyDroppingProxy
) -> None:
    store, _ = stores
    await store.put_run(KEY, {"v": 1}, expected_version=0)
    # Held back until the re-send (the only later request holding the blob) goes out.
    proxy.hold_next_request(release_on=b"late-blob")
    record = await store.put_run(KEY, {"v": "late-blob"}, expected_version=1)
    assert proxy.delivered_late == 1
    assert (record.version, record.blob) == (2, {"v": "late-blob"})
    stored = await store.get_run(KEY)
    assert stored is not None and stored.version == 2


@pytest.mark.asyncio
async def test_a_lost_put_run_is_a_conflict_when_another_writer_won_with_the_same_blob(
    stores: tuple[AsyncRedisStateStore, AsyncRedisStateStore], proxy: ReplyDroppingProxy
) -> None:
    store, other = stores
    await store.put_run(KEY, {"v": 1}, expected_version=0)
    await other.put_run(KEY, {"status": "done"}, expected_version=1)
    proxy.drop_next_request()
    with pytest.raises(StateConflictError) as conflict:
        await store.put_run(KEY, {"status": "done"}, expected_version=1, status="done")
    assert proxy.lost_requests == 1
    assert (conflict.value.expected, conflict.value.actual) == (1, 2)
    stored = await store.get_run(KEY)
    assert stored is not None and (stored.version, stored.status) == (2, "running")


@pytest.mark.asyncio
async def test_a_put_session_that_lands_late_is_not_a_conflict_with_itself(
    stores: tuple[AsyncRedisStateStore, AsyncRedisStateStore], proxy: ReplyDroppingProxy
) -> None:
    store, _ = stores
    await store.put_session("acme", "s", {"v": 1}, expected_version=0)
    proxy.hold_next_request(release_on=b"late-blob")
    record = await store.put_session("acme", "s", {"v": "late-blob"}, expected_version=1)
    assert proxy.delivered_late == 1
    assert (record.version, record.blob) == (2, {"v": "late-blob"})


@pytest.mark.asyncio
async def test_a_lost_put_session_is_a_conflict_when_another_writer_won_with_the_same_blob(
    stores: tuple[AsyncRedisStateStore, AsyncRedisStateStore], proxy: ReplyDroppingProxy
) -> None:
    store, other = stores
    await store.put_session("acme", "s", {"v": 1}, expected_version=0)
    await other.put_session("acme", "s", {"v": 2}, expected_version=1)
    proxy.drop_next_request()
    with pytest.raises(StateConflictError) as conflict:
        await store.put_session("acme", "s", {"v": 2}, expected_version=1)
    assert proxy.lost_requests == 1
    assert (conflict.value.expected, conflict.value.actual) == (1, 2)


@pytest.mark.asyncio
async def test_a_finalize_whose_reply_is_lost_is_settled_by_its_write_id(
    stores: tuple[AsyncRedisStateStore, AsyncRedisStateStore], proxy: ReplyDroppingProxy
) -> None:
    store, _ = stores
    warm = RunKey("acme", "warm")
    for key in (warm, KEY):
        await store.put_run(key, {}, expected_version=0)
    # The script is loaded (a first EVALSHA may be answered NOSCRIPT and sent as EVAL).
    await store.finalize(warm, status="completed", event_type="done", event_data={})
    proxy.drop_next_reply()  # no event_id: only the write id can settle it
    record = await store.finalize(KEY, status="completed", event_type="done", event_data={})
    assert proxy.dropped == 1 and (record.status, record.version) == ("completed", 2)
    assert [e.terminal for e in await store.read_events(KEY)] == [True]


@pytest.mark.asyncio
async def test_a_lost_patch_written_over_since_is_outcome_unknown(
    stores: tuple[AsyncRedisStateStore, AsyncRedisStateStore], proxy: ReplyDroppingProxy
) -> None:
    store, other = stores
    await store.put_run(KEY, {}, expected_version=0)
    await other.patch_run(KEY, CounterDelta(iterations=1))  # the run's last write: not ours
    proxy.drop_next_request()
    with pytest.raises(StoreOutcomeUnknown):
        await store.patch_run(KEY, CounterDelta(iterations=1))
    stored = await store.get_run(KEY)
    assert stored is not None and stored.iterations == 1  # never sent again


# -- the event log: a lost reply is settled by the event_id -------------------------------------
@pytest.mark.asyncio
async def test_an_append_whose_reply_is_lost_is_settled_by_its_event_id(
    stores: tuple[AsyncRedisStateStore, AsyncRedisStateStore],
    proxy: ReplyDroppingProxy,
    dedicated_redis_target: RedisTarget,
) -> None:
    store, other = stores
    await store.put_run(KEY, {}, expected_version=0)
    await store.append_event(KEY, "warm", {})  # seq 1; the script is loaded
    proxy.drop_next_reply()  # the append runs on the server; its reply is lost
    with counting_commands(dedicated_redis_target.port) as counted:
        event = await store.append_event(KEY, "step", {"n": 1}, event_id="e1")
    assert proxy.dropped == 1
    # Sent again (the event_id makes it safe), it found the stored event: nothing appended.
    assert counted.sent.count("evalsha") == 2
    stored = await other.read_events(KEY)
    assert [(e.seq, e.type, e.event_id) for e in stored] == [(1, "warm", None), (2, "step", "e1")]
    assert event == stored[1]
    # The caller's own resend with the same id returns it too.
    assert await store.append_event(KEY, "step", {"n": 1}, event_id="e1") == stored[1]
    assert len(await other.read_events(KEY)) == 2


@pytest.mark.asyncio
async def test_a_finalize_whose_reply_is_lost_is_settled_by_its_event_id(
    stores: tuple[AsyncRedisStateStore, AsyncRedisStateStore],
    proxy: ReplyDroppingProxy,
    dedicated_redis_target: RedisTarget,
) -> None:
    store, other = stores
    await store.put_run(KEY, {}, expected_version=0)
    await store.append_event(KEY, "step", {})
    proxy.drop_next_reply()
    with counting_commands(dedicated_redis_target.port) as counted:
        record = await store.finalize(
            KEY, status="completed", event_type="done", event_data={"ok": 1}, event_id="end"
        )
    assert proxy.dropped == 1
    # Settled by sending it again (the retry of the finalize that ended the run), not by
    # reading the run back.
    assert counted.sent.count("evalsha") == 2 and "hgetall" not in counted.sent
    assert (record.status, record.version) == ("completed", 2)
    stored = await other.get_run(KEY)
    assert stored is not None and (stored.status, stored.version) == ("completed", 2)
    events = await other.read_events(KEY)
    assert [(e.seq, e.type, e.event_id, e.terminal) for e in events] == [
        (1, "step", None, False),
        (2, "done", "end", True),
    ]


@pytest.mark.asyncio
async def test_an_append_without_an_event_id_whose_reply_is_lost_is_outcome_unknown(
    stores: tuple[AsyncRedisStateStore, AsyncRedisStateStore],
    proxy: ReplyDroppingProxy,
    dedicated_redis_target: RedisTarget,
) -> None:
    store, other = stores
    await store.put_run(KEY, {}, expected_version=0)
    await store.append_event(KEY, "warm", {})
    proxy.drop_next_reply()
    with (
        counting_commands(dedicated_redis_target.port) as counted,
        pytest.raises(StoreOutcomeUnknown, match="pass event_id= to make it retryable"),
    ):
        await store.append_event(KEY, "step", {"n": 1})
    assert proxy.dropped == 1
    assert counted.sent.count("evalsha") == 1  # never sent again
    # It ran once on the server (the proxy lost only the reply).
    assert [e.type for e in await other.read_events(KEY)] == ["warm", "step"]

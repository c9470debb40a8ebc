"""The SQLite work queue beyond the kit: its schema version, server time, bounded recovery and
pruning, and the contract's new operations on a real file."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from runyard import ManualClock, QueuePolicy
from runyard.errors import ConfigurationError, ItemLeasedError, LeaseLostError
from runyard.models import NewItem
from runyard.policy import RECLAIM_PER_CLAIM
from runyard.sqlite import SQLITE_SCHEMA, AsyncSqliteWorkQueue
from runyard.sqlite.queue_transactions import PRUNE_SCAN_PER_LIMIT

POLICY = QueuePolicy(lease_seconds=30, max_attempts=3, backoff_base=10, random=lambda: 0.5)


@pytest_asyncio.fixture
async def clocked(tmp_path: Path) -> AsyncIterator[tuple[AsyncSqliteWorkQueue, ManualClock]]:
    clock = ManualClock()
    queue = await AsyncSqliteWorkQueue.open(
        tmp_path / "q.db", create_schema=True, clock=clock, policy=POLICY
    )
    try:
        yield queue, clock
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_queue_file_at_version_one_is_refused_with_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    await (await AsyncSqliteWorkQueue.open(path, create_schema=True)).aclose()
    with sqlite3.connect(path) as conn:  # what a runyard before per-item max_attempts wrote
        conn.execute("ALTER TABLE runyard_work_items DROP COLUMN max_attempts")
        conn.execute("CREATE INDEX runyard_work_items_ready_seq ON runyard_work_items (ready_seq)")
        for statement in _AT_VERSION_2:
            conn.execute(statement)
        conn.execute("UPDATE runyard_schema SET version = 1 WHERE component = 'queue'")
    migration, indexes = await migrate_as_refused(path, 1)
    assert 'ALTER TABLE "runyard_work_items" ADD COLUMN max_attempts' in migration
    assert not _GONE & indexes and indexes >= _READY
    queue = await AsyncSqliteWorkQueue.open(path)
    try:
        item = await queue.enqueue("acme", {"n": 1}, max_attempts=2)
        assert item.max_attempts == 2
    finally:
        await queue.aclose()


# What a runyard of queue version 4 had: no turn counter of its own (a claimed tenant's turn was
# its token, a new tenant's the token counter's value), in the two triggers that give turns.
AT_VERSION_4 = (
    "DROP TRIGGER runyard_work_items_claimed",
    "DROP TRIGGER runyard_work_items_enters",
    "ALTER TABLE runyard_counters DROP COLUMN turns",
    """CREATE TRIGGER runyard_work_items_claimed AFTER UPDATE OF token ON runyard_work_items
    WHEN NEW.state = 'leased' AND OLD.state = 'ready'
    BEGIN
        UPDATE runyard_counters SET claims = NEW.token WHERE id = 1;
        UPDATE runyard_tenant_turns SET turn = NEW.token WHERE tenant = NEW.tenant;
    END""",
    """CREATE TRIGGER runyard_work_items_enters AFTER INSERT ON runyard_work_items
    BEGIN
        INSERT OR REPLACE INTO runyard_tenant_turns (tenant, turn)
        SELECT p.tenant, p.turn FROM runyard_tenant_turns_parked p
        WHERE p.tenant = NEW.tenant AND (p.due_at IS NULL OR p.due_at > NEW.available_at);
        INSERT OR IGNORE INTO runyard_tenant_turns (tenant, turn)
        SELECT NEW.tenant, c.claims FROM runyard_counters c
        WHERE c.id = 1 AND NOT EXISTS
            (SELECT 1 FROM runyard_tenant_turns_parked p WHERE p.tenant = NEW.tenant);
    END""",
)
# What a runyard of queue version 3 lacked: the parked tenants (their table and triggers).
AT_VERSION_3 = (
    *AT_VERSION_4,
    "DROP TRIGGER runyard_work_items_parks",
    "DROP TRIGGER runyard_work_items_enters",
    "DROP TRIGGER runyard_work_items_rejoins_ready",
    "DROP TRIGGER runyard_tenant_turns_enters",
    "DROP TABLE runyard_tenant_turns_parked",
    """CREATE TRIGGER runyard_work_items_enters AFTER INSERT ON runyard_work_items
    BEGIN
        INSERT OR IGNORE INTO runyard_tenant_turns (tenant, turn)
        VALUES (NEW.tenant, (SELECT c.claims FROM runyard_counters c WHERE c.id = 1));
    END""",
)
# What a runyard of queue version 2 had beside version 3's indexes: the index by worker.
_AT_VERSION_2 = (
    *AT_VERSION_3,
    "CREATE INDEX runyard_work_items_by_worker ON runyard_work_items (worker, token) "
    "WHERE state = 'leased'",
)


async def migrate_as_refused(path: Path, found: int) -> tuple[str, set[str]]:
    """Open the queue on ``path`` (its queue at version ``found``): it is refused naming both
    versions; run the repair the message names (SQLITE_SCHEMA, then its SQL in one
    transaction). Return the SQL and the names of the file's indexes and triggers after; the
    ``_enters`` trigger is version 5's (it knows parked tenants and the turn counter), and the
    turn counter starts at the token counter's value."""
    with pytest.raises(ConfigurationError) as refused:
        await AsyncSqliteWorkQueue.open(path, create_schema=True)
    message = str(refused.value)
    assert f"'queue' is at schema version {found}" in message and "version 5" in message
    migration = message.split("run `")[1].split("`")[0]
    with sqlite3.connect(path) as conn:  # the repair the message names
        conn.executescript(SQLITE_SCHEMA)
        conn.executescript(f"BEGIN; {migration}; COMMIT;")
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        (enters,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'runyard_work_items_enters'"
        ).fetchone()
        counters = conn.execute("SELECT claims, turns FROM runyard_counters").fetchall()
        (claimed,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'runyard_work_items_claimed'"
        ).fetchone()
    assert "runyard_tenant_turns_parked" in enters and "c.turns" in enters
    assert "turns = turns + 1" in claimed
    assert [(claims, turns) for claims, turns in counters if claims == turns] == counters
    return migration, names


_GONE = {"runyard_work_items_by_worker", "runyard_work_items_ready_seq"}
_READY = {"runyard_work_items_ready", "runyard_work_items_due", "runyard_work_items_parks"}


@pytest.mark.asyncio
async def test_a_queue_file_at_version_two_migrates_and_keeps_its_leases(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    clock = ManualClock()
    queue = await AsyncSqliteWorkQueue.open(path, create_schema=True, clock=clock, policy=POLICY)
    try:
        await queue.enqueue("acme", {"n": 1}, item_id="a")
        await queue.enqueue("acme", {"n": 2}, item_id="b")
        held = await queue.claim("w1")
    finally:
        await queue.aclose()
    assert held is not None
    with sqlite3.connect(path) as conn:  # what a runyard of queue version 2 wrote
        for statement in _AT_VERSION_2:
            conn.execute(statement)
        conn.execute("UPDATE runyard_schema SET version = 2 WHERE component = 'queue'")
    migration, indexes = await migrate_as_refused(path, 2)
    assert migration.startswith('DROP INDEX IF EXISTS "runyard_work_items_by_worker"')
    assert not _GONE & indexes and indexes >= _READY
    queue = await AsyncSqliteWorkQueue.open(path, clock=clock, policy=POLICY)
    try:
        (adopted,) = await queue.adopt("w1")  # found without the index by worker
        assert (adopted.item_id, adopted.token > held.token) == (held.item_id, True)
        await queue.complete(adopted)
        urgent = await queue.enqueue("acme", {"n": 3}, item_id="c", priority=5)
        assert urgent.state == "ready"
        first, second = await queue.claim("w2"), await queue.claim("w2")
        assert first is not None and second is not None
        assert (first.item_id, second.item_id) == ("c", "b")  # highest priority first
        assert await queue.adopt("w1") == []
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_run_at_is_judged_by_the_database_clock(tmp_path: Path) -> None:
    queue = await AsyncSqliteWorkQueue.open(tmp_path / "q.db", create_schema=True)
    try:
        later = await queue.enqueue("acme", {"n": 1}, run_at=time.time() + 600)
        await queue.enqueue("acme", {"n": 2}, run_at=1.0)  # in the past: due at once
        stats = await queue.stats()
        assert (stats.ready, stats.delayed) == (1, 1)
        assert later.available_at > later.enqueued_at + 590
        lease = await queue.claim("w1")
        assert lease is not None and lease.item.payload == {"n": 2}
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_an_enqueued_item_is_returned_as_it_is_stored(tmp_path: Path) -> None:
    # The kit holds every backend to this on an injected clock; here the time is the
    # database's, pinned before the insert (rows.due_at, entered_item), and a clock before the
    # epoch, whose due time SQLite floors at 0.
    queue = await AsyncSqliteWorkQueue.open(tmp_path / "q.db", create_schema=True)
    try:
        made = [
            await queue.enqueue("acme", "x", dedupe_key="k", delay_seconds=12.5),
            await queue.enqueue("beta", {"n": 4}, run_at=time.time() + 600),
            *await queue.enqueue_many("beta", [NewItem(payload=5), NewItem(payload=None)]),
        ]
        for item in made:
            assert await queue.get_item(item.tenant, item.item_id) == item
    finally:
        await queue.aclose()
    early = await AsyncSqliteWorkQueue.open(
        tmp_path / "early.db", create_schema=True, clock=ManualClock(-100.0)
    )
    try:
        item = await early.enqueue("acme", {})
        assert item.available_at == 0.0
        assert await early.get_item("acme", item.item_id) == item
    finally:
        await early.aclose()


@pytest.mark.asyncio
async def test_a_claim_reclaims_a_bounded_number_of_lapsed_leases(
    clocked: tuple[AsyncSqliteWorkQueue, ManualClock],
) -> None:
    queue, clock = clocked
    await queue.enqueue_many("acme", [NewItem(payload={"n": n}) for n in range(12)])
    assert len(await queue.claim_many("crashed", limit=12)) == 12
    clock.advance(31)
    lease = await queue.claim("w2")
    still_lapsed = (await queue.stats()).leased - (lease is not None)
    assert still_lapsed == 12 - RECLAIM_PER_CLAIM
    assert len(await queue.reap()) == still_lapsed


@pytest.mark.asyncio
async def test_adopt_mints_tokens_above_every_earlier_one(
    clocked: tuple[AsyncSqliteWorkQueue, ManualClock],
) -> None:
    queue, _ = clocked
    await queue.enqueue("acme", {"n": 1})
    await queue.enqueue("acme", {"n": 2})
    first, second = await queue.claim_many("w1", limit=2)
    adopted = await queue.adopt("w1")
    assert [a.item_id for a in adopted] == [first.item_id, second.item_id]
    assert min(a.token for a in adopted) > second.token
    refused = await queue.complete_many([first, second])
    assert all(isinstance(r, LeaseLostError) and r.reason == "taken" for r in refused)
    assert await queue.complete_many(adopted) == [None, None]


@pytest.mark.asyncio
async def test_cancel_refuses_a_leased_item_and_frees_a_dedupe_key(
    clocked: tuple[AsyncSqliteWorkQueue, ManualClock],
) -> None:
    queue, _ = clocked
    ready = await queue.enqueue("acme", {"n": 1}, dedupe_key="k")
    assert await queue.cancel("acme", ready.item_id) is True
    assert await queue.cancel("acme", ready.item_id) is False
    again = await queue.enqueue("acme", {"n": 2}, dedupe_key="k")
    assert again.item_id != ready.item_id
    lease = await queue.claim("w1")
    assert lease is not None
    with pytest.raises(ItemLeasedError) as leased:
        await queue.cancel("acme", again.item_id)
    assert leased.value.worker == "w1"
    await queue.complete(lease)


@pytest.mark.asyncio
async def test_purge_dead_deletes_the_oldest_dead_letters_first(
    clocked: tuple[AsyncSqliteWorkQueue, ManualClock],
) -> None:
    queue, clock = clocked
    for n in range(3):
        await queue.enqueue("acme", {"n": n}, max_attempts=1)
        lease = await queue.claim("w1")
        assert lease is not None
        await queue.fail(lease, error="boom")
        clock.advance(10)
    assert await queue.purge_dead("acme", older_than=15) == 2
    (left,) = await queue.dead_letters("acme")
    assert left.item.payload == {"n": 2}
    assert await queue.purge_dead("acme", limit=5) == 1


@pytest.mark.asyncio
async def test_prune_looks_at_a_bounded_slice_of_tenants_per_call(
    clocked: tuple[AsyncSqliteWorkQueue, ManualClock],
) -> None:
    queue, _ = clocked
    for n in range(2 * PRUNE_SCAN_PER_LIMIT):
        await queue.enqueue(f"busy-{n:02d}", {"n": n})
    idle = await queue.enqueue("zz-idle", {"n": 0})
    assert await queue.claim("w1") is not None  # a turn for busy-00: it stays busy
    assert await queue.cancel("zz-idle", idle.item_id)
    # The idle tenant comes after 19 busy ones (same turn, then by name): the first call's
    # slice of 10 does not reach it, the next one (from where the first stopped) does.
    assert await queue.prune(limit=1) == 0
    assert await queue.prune(limit=1) == 1
    assert await queue.prune(limit=1) == 0
    again = await queue.enqueue("zz-idle", {"n": 1})
    assert (await queue.get_item("zz-idle", again.item_id)) is not None


@pytest.mark.asyncio
async def test_every_queue_call_is_one_trip_to_the_driver(
    clocked: tuple[AsyncSqliteWorkQueue, ManualClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    queue, clock = clocked
    trips: list[str] = []
    connection = queue.connection
    for name in ("call", "fetch", "fetch_then_commit", "script"):
        original = getattr(connection, name)

        async def counted(*args: object, _original: Any = original, _name: str = name) -> Any:
            trips.append(_name)
            return await _original(*args)

        monkeypatch.setattr(connection, name, counted)
    await queue.verify()  # the schema check is done once, before counting
    trips.clear()
    await queue.enqueue_many("acme", [NewItem(payload={"n": n}) for n in range(4)])
    leases = await queue.claim_many("w1", limit=3)
    clock.advance(31)  # every lease lapses: the next claim reclaims them first
    assert await queue.claim("w2") is not None
    await queue.heartbeat_many(leases)
    await queue.complete_many(leases)
    await queue.release_many(leases)
    await queue.adopt("w2")
    await queue.stats()
    assert trips == ["call"] * 8

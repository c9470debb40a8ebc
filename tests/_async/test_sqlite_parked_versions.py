"""SQLite queue version 4 beside other versions and other tables: a file at queue version 3
migrates (the refusal's SQL) and parks; this runyard's schema script reaching such a file
before its migration parks nothing for a runyard of version 3; version 3's trigger statement on
a migrated file changes nothing; two queues named table by table in one file park apart."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from runyard import ConfigurationError, ManualClock
from runyard.sqlite import AsyncSqliteStateStore, AsyncSqliteWorkQueue, SqliteTables
from runyard.sqlite.statements_queue import queue_statements

from tests._async.test_sqlite_parked import PARK_PER_CLAIM, POLICY, T0, drain, open_queue, tables_of
from tests._async.test_sqlite_queue import AT_VERSION_3, AT_VERSION_4, migrate_as_refused


@pytest.mark.asyncio
async def test_a_queue_file_at_version_three_migrates_and_parks(tmp_path: Path) -> None:
    path, clock = tmp_path / "v3.db", ManualClock(T0)
    queue = await open_queue(path, clock)
    try:
        for k in range(80):
            await queue.enqueue(f"idle-{k:02d}", {"k": k}, delay_seconds=60)
        await queue.enqueue("zz", {"n": 0})
    finally:
        await queue.aclose()
    with sqlite3.connect(path) as conn:  # what a runyard of queue version 3 had
        for statement in AT_VERSION_3:
            conn.execute(statement)
        conn.execute("UPDATE runyard_schema SET version = 3 WHERE component = 'queue'")
    migration, names = await migrate_as_refused(path, 3)
    assert migration.startswith('ALTER TABLE "runyard_counters" ADD COLUMN turns')
    assert 'DROP TRIGGER IF EXISTS "runyard_work_items_enters"' in migration
    assert {"runyard_work_items_parks", "runyard_work_items_rejoins_ready"} <= names
    queue = await open_queue(path, clock)
    try:
        lease = await queue.claim("w")
        assert lease is not None and lease.tenant == "zz"
        assert len(tables_of(path)[1]) == PARK_PER_CLAIM
        await queue.complete(lease)
        await queue.enqueue("new", {"n": 0})  # a new tenant still joins the rotation
        clock.advance(60)
        served = [tenant for tenant, _ in await drain(queue)]
        assert served == [f"idle-{k:02d}" for k in range(80)] + ["new"]
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_two_queues_in_one_file_park_their_tenants_apart(tmp_path: Path) -> None:
    """The parked table is named after each queue's rotation table (turns + "_parked"), so
    queues named table by table in one file never share it."""
    path, clock = tmp_path / "q.db", ManualClock(T0)
    names = {  # the rotation's table named, the parked one not
        side: SqliteTables(work=f"{side}_work", turns=f"{side}_turns", counters=f"{side}_counters")
        for side in ("a", "b")
    }
    queues = {}
    for side, tables in names.items():
        queues[side] = await AsyncSqliteWorkQueue.open(
            path, create_schema=True, clock=clock, policy=POLICY, tables=tables
        )
    try:
        assert names["a"].turns_parked == "a_turns_parked"
        await queues["a"].enqueue("x", {"side": "a"}, delay_seconds=60)
        await queues["a"].enqueue("zz", {"side": "a"})
        assert await drain(queues["a"], 1) == [("zz", {"side": "a"})]  # parks a's x
        await queues["b"].enqueue("x", {"side": "b"})  # b's x, in b's rotation
        clock.advance(61)
        served = await drain(queues["a"])
        assert served == [("x", {"side": "a"})]
        assert await drain(queues["b"]) == [("x", {"side": "b"})]
    finally:
        for queue in queues.values():
            await queue.aclose()


@pytest.mark.asyncio
async def test_an_older_schema_script_after_the_migration_changes_nothing(
    tmp_path: Path,
) -> None:
    """An older runyard's schema script (its state store opened with create_schema=True)
    finds this runyard's _enters trigger under the name it knows and leaves it: a parked tenant's
    enqueue due no earlier leaves it parked only, and claims go on."""
    path, clock = tmp_path / "q.db", ManualClock(T0)
    queue = await open_queue(path, clock)
    try:
        await queue.enqueue("a", {"n": 0}, delay_seconds=60)
        for n in range(3):
            await queue.enqueue("zz", {"n": n})
        assert len(await drain(queue, 1)) == 1  # parks a
        with sqlite3.connect(path) as conn:  # version 3's trigger, as its script creates it
            old_trigger = AT_VERSION_3[-1]
            conn.execute(old_trigger.replace("CREATE TRIGGER", "CREATE TRIGGER IF NOT EXISTS"))
        await queue.enqueue("a", {"n": 1}, delay_seconds=90)
        turns, parked = tables_of(path)
        assert "a" in parked and "a" not in turns
        assert [tenant for tenant, _ in await drain(queue)] == ["zz", "zz"]
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_queue_file_at_version_three_parks_nothing_before_its_migration(
    tmp_path: Path,
) -> None:
    """This runyard's schema script may reach a file of queue version 3 before its migration
    (its state store applies it with create_schema=True and opens the file): the park trigger
    it adds parks nothing until the version is 4, so a runyard of version 3 still claiming
    from the file (which never puts tenants back) strands nobody."""
    path, clock = tmp_path / "v3.db", ManualClock(T0)
    queue = await open_queue(path, clock)
    try:
        await queue.enqueue("a", {"n": 0}, delay_seconds=60)
        for n in range(2):
            await queue.enqueue("b", {"n": n})
    finally:
        await queue.aclose()
    with sqlite3.connect(path) as conn:  # what a runyard of queue version 3 had
        for statement in AT_VERSION_3:
            conn.execute(statement)
        conn.execute("UPDATE runyard_schema SET version = 3 WHERE component = 'queue'")
    await (await AsyncSqliteStateStore.open(path, create_schema=True)).aclose()
    claim = queue_statements(SqliteTables())["claim"]
    params = {"worker": "old", "now": T0, "lease_seconds": 30.0, "max_lease": 3600.0}
    with closing(sqlite3.connect(path)) as conn:  # a claim of version 3 (the same statement)
        (row,) = conn.execute(claim, params).fetchall()
        conn.commit()
    assert row[0] == "b"
    turns, parked = tables_of(path)
    assert parked == {} and set(turns) == {"a", "b"}


def _for_tables(statement: str, tables: SqliteTables) -> str:
    """One of AT_VERSION_4's statements (default names) for ``tables``."""
    for default, name in (
        ("runyard_work_items", tables.work),
        ("runyard_tenant_turns", tables.turns),
        ("runyard_counters", tables.counters),
    ):
        statement = statement.replace(default, name)
    return statement


async def _refusal(path: Path, tables: SqliteTables) -> str:
    with pytest.raises(ConfigurationError) as refused:
        await AsyncSqliteWorkQueue.open(path, tables=tables)
    return str(refused.value)


@pytest.mark.asyncio
async def test_each_set_of_queue_tables_sharing_the_schema_table_is_migrated(
    tmp_path: Path,
) -> None:
    """Queues named table by table share the schema table's version row: the migration run for
    one set of tables sets it for all. The other set, its triggers still version 4's, is
    refused with the migration for its own tables (never served in version 4's order), and
    serves as the memory backend does once it ran."""
    path, clock = tmp_path / "q.db", ManualClock(T0)
    names = {
        side: SqliteTables(work=f"{side}_work", turns=f"{side}_turns", counters=f"{side}_counters")
        for side in ("a", "b")
    }
    for tables in names.values():
        await (await AsyncSqliteWorkQueue.open(path, create_schema=True, tables=tables)).aclose()
    with sqlite3.connect(path) as conn:  # both sets as a runyard of queue version 4 left them
        for tables in names.values():
            for statement in AT_VERSION_4:
                conn.execute(_for_tables(statement, tables))
        conn.execute("UPDATE runyard_schema SET version = 4 WHERE component = 'queue'")
    for side in ("a", "b"):
        message = await _refusal(path, names[side])
        if side == "a":
            assert "'queue' is at schema version 4" in message
        else:  # a's migration set the row to 5; b's triggers say otherwise
            assert "the queue tables of b_work are at version 4" in message
        migration = message.split("run `")[1].split("`")[0]
        assert f'ALTER TABLE "{side}_counters" ADD COLUMN turns' in migration
        with sqlite3.connect(path) as conn:
            conn.executescript(f"BEGIN; {migration}; COMMIT;")
    queue = await AsyncSqliteWorkQueue.open(path, clock=clock, policy=POLICY, tables=names["b"])
    try:
        await queue.enqueue("b", {}, item_id="b1")
        await queue.enqueue("b", {}, item_id="b2")
        first = await queue.claim("w1")
        assert first is not None and first.item_id == "b1"
        assert [lease.item_id for lease in await queue.adopt("w1")] == ["b1"]
        await queue.enqueue("aa", {}, item_id="aa1")  # ties with b: first by name
        served = [await queue.claim("w2") for _ in range(2)]
        assert [lease and lease.item_id for lease in served] == ["aa1", "b2"]
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_queue_whose_tables_lack_a_trigger_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    await (await AsyncSqliteWorkQueue.open(path, create_schema=True)).aclose()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER runyard_work_items_claimed")
    message = await _refusal(path, SqliteTables())
    assert "trigger runyard_work_items_claimed does not exist" in message
    assert "create_schema=True" in message
    await (await AsyncSqliteWorkQueue.open(path, create_schema=True)).aclose()  # the repair
